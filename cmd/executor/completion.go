package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

func completionCommand() *command {
	return &command{name: "completion", args: "SHELL", flags: completionFlags,
		summary: "print the shell completion script (bash): source <(executor completion bash)"}
}

func completionFlags(_ *flag.FlagSet, env *cliEnv) runFunc {
	return func(_ context.Context, pos []string) error {
		if pos[0] != "bash" {
			return usagef("shell %s: only bash is supported", quoteArg(pos[0]))
		}
		return writeBashCompletion(env.stdout, commandTree())
	}
}

// writeBashCompletion writes a bash completion function made from the
// command table: after the words naming a command, its verbs and flags.
func writeBashCompletion(w io.Writer, root *command) error {
	words := map[string][]string{} // " deadletter requeue" → what may follow
	walk(nil, root, func(path []*command, c *command) {
		key := ""
		if len(path) > 0 {
			key = " " + pathName(path)
		}
		words[key] = append(words[key], c.childList()...)
		if c.flags != nil {
			fs, _ := newFlagSet(&cliEnv{}, path)
			fs.VisitAll(func(f *flag.Flag) { words[key] = append(words[key], "-"+f.Name) })
		} else if len(path) == 0 {
			words[key] = append(words[key], "-config", "-h")
		}
	})
	keys := make([]string, 0, len(words))
	for k := range words {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("# bash completion for executor: source <(executor completion bash)\n")
	b.WriteString("_executor() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w i words=\"\"\n")
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=\"${COMP_WORDS[i]}\"\n\t\tcase \"$path $w\" in\n")
	for _, k := range keys {
		if k != "" {
			fmt.Fprintf(&b, "\t\t%q) path=\"$path $w\" ;;\n", k)
		}
	}
	b.WriteString("\t\tesac\n\tdone\n\tcase \"$path\" in\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q) words=%q ;;\n", k, strings.Join(words[k], " "))
	}
	b.WriteString("\tesac\n\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -o default -F _executor executor\n")
	_, err := io.WriteString(w, b.String())
	return err
}
