package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/orderjob/executor/internal/suggest"
)

// command is one node of the command tree: a command that runs, a group of
// verbs (deadletter, tasks), or both (migrate runs itself, and `migrate
// status`). Its flags are declared once, by flags on the command's own
// FlagSet; the usage line and the -h listing are made from that FlagSet, so
// help and flags cannot drift apart.
type command struct {
	name    string
	args    string // positionals as the usage shows them: "HANDLER", "[ORDERNO]"
	summary string // one line, in the parent's listing
	note    string // more help after the flags (optional)
	// flags defines the command's flags on fs and returns the function that
	// runs the command with its positional arguments. nil for a group.
	flags func(fs *flag.FlagSet, env *cliEnv) runFunc
	sub   []*command
	// errPrefix is the "pkg" of the "pkg: " its errors start with when
	// that is not its name (trigger's come from package provision): the
	// error line drops it as it drops the command's own name.
	errPrefix string
}

// runFunc runs a command once its flags are parsed and its positionals
// counted.
type runFunc func(ctx context.Context, pos []string) error

// commandTree is the executor's command table, in the order `executor -h`
// lists it.
func commandTree() *command {
	return &command{name: "executor", sub: []*command{
		serveCommand(), runCommand(), migrateCommand(), demoDataCommand(),
		deadLetterCommand(), tasksCommand(), outboxCommand(), refundsCommand(),
		provisionCommand(), triggerCommand(), healthcheckCommand(), versionCommand(), completionCommand(),
	}}
}

// cliEnv is what every subcommand gets: the global -config value and the
// streams (stdout for results and run logs, stderr for the process log).
type cliEnv struct {
	configPath string
	stdout     io.Writer
	stderr     io.Writer
}

// exitError carries a specific exit code (e.g. 1 for a failed run) without
// printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError marks bad command-line input: the message is printed with the
// command's usage line and the exit code is 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const configFlagHelp = "read settings from `FILE`, YAML or .properties (optional; environment variables win over it)"

// run parses the global flags, walks the command tree to the command the
// arguments name and maps its error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{stdout: stdout, stderr: stderr}
	useLibLogger(slog.New(slog.DiscardHandler)) // until the command has its logger
	root := commandTree()
	global := flag.NewFlagSet("executor", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.Usage = func() {}
	global.StringVar(&env.configPath, "config", "", configFlagHelp)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printGroupHelp(stdout, root, nil, global)
			return 0
		}
		return flagError(stderr, nil, global, err)
	}
	path, c, rest := resolve(root, global.Args())
	if c.flags == nil { // a group: the next word should have been a verb
		return groupError(env, root, global, path, c, rest)
	}
	return execute(ctx, env, path, c, rest)
}

// resolve follows the words of args down the tree as far as they name
// commands; it returns the path walked, the command reached and the rest.
func resolve(root *command, args []string) ([]*command, *command, []string) {
	var path []*command
	c := root
	for len(args) > 0 {
		next := c.child(args[0])
		if next == nil {
			break
		}
		path = append(path, next)
		c, args = next, args[1:]
	}
	return path, c, args
}

// walk calls f for c and every command below it, with its path.
func walk(path []*command, c *command, f func(path []*command, c *command)) {
	f(path, c)
	for _, s := range c.sub {
		walk(append(slices.Clone(path), s), s, f)
	}
}

func (c *command) child(name string) *command {
	for _, s := range c.sub {
		if s.name == name {
			return s
		}
	}
	return nil
}

// groupError answers a path that ends at a group: help when asked for, else
// what is missing or a guess at what was meant.
func groupError(env *cliEnv, root *command, global *flag.FlagSet, path []*command, c *command, rest []string) int {
	name := pathName(path)
	if len(rest) > 0 {
		switch rest[0] {
		case "-h", "-help", "--help", "help":
			printGroupHelp(env.stdout, c, path, global)
			return 0
		}
	}
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		if c == root {
			fmt.Fprintln(env.stderr, "executor: want a command (`executor serve` to run the executor)")
			fmt.Fprintln(env.stderr)
			printGroupHelp(env.stderr, c, path, global)
			return 2
		}
		fmt.Fprintf(env.stderr, "executor %s: want a subcommand: %s\nrun 'executor %s -h'\n", name, c.childNames(), name)
		return 2
	}
	what := "command"
	prefix := "executor"
	if c != root {
		what, prefix = "subcommand", "executor "+name
	}
	fmt.Fprintf(env.stderr, "%s: unknown %s %s%s\nrun '%s -h'\n", prefix, what, quoteArg(rest[0]), didYouMean(rest[0], c.childList()), prefix)
	return 2
}

func (c *command) childList() []string {
	names := make([]string, len(c.sub))
	for i, s := range c.sub {
		names[i] = s.name
	}
	return names
}

func (c *command) childNames() string { return strings.Join(c.childList(), ", ") }

// pathName is "deadletter requeue" for the path root → deadletter → requeue.
func pathName(path []*command) string {
	names := make([]string, len(path))
	for i, c := range path {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

// newFlagSet is the FlagSet of the command at path: every command accepts
// -config too (so it may follow the command), then its own flags.
func newFlagSet(env *cliEnv, path []*command) (*flag.FlagSet, runFunc) {
	c := path[len(path)-1]
	fs := flag.NewFlagSet("executor "+pathName(path), flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by run, once
	fs.Usage = func() {}
	fs.StringVar(&env.configPath, "config", env.configPath, configFlagHelp)
	return fs, c.flags(fs, env)
}

// execute parses the command's flags (before, between or after its
// positionals), counts the positionals and runs it.
func execute(ctx context.Context, env *cliEnv, path []*command, c *command, args []string) int {
	name := pathName(path)
	fs, runIt := newFlagSet(env, path)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(env.stdout, path, fs)
		return 0
	}
	if err != nil {
		return flagError(env.stderr, path, fs, err)
	}
	if err := c.checkArgs(pos); err != nil {
		fmt.Fprintf(env.stderr, "executor %s: %v%s\nusage: %s\n", name, err, c.subGuess(pos), usageLine(path))
		return 2
	}
	err = runIt(ctx, pos)
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(env.stderr, "executor %s: %s\nusage: %s\n", name, cutQuoted(ue.msg), usageLine(path))
		return 2
	default:
		fmt.Fprintf(env.stderr, "executor %s: %s\n", name, cutQuoted(errorText(path, explain(err))))
		return 1
	}
}

// quoteArg is s quoted as %q quotes it, cut to its first 64 bytes when
// longer: an argument pasted from a file (100 KB of it) came back whole in
// the one-line error.
func quoteArg(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:cut], len(s))
}

// longQuoted is a Go-quoted string (as %q writes one) of more than 200
// characters: no name, ID or setting the messages quote is that long.
var longQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.){201,}"`)

// cutQuoted cuts, with quoteArg, every long quoted value in a message: a
// flag's value (-status, -limit, -since) is quoted back by the flag
// package and the views, and a value pasted from a file came back whole.
func cutQuoted(msg string) string {
	return longQuoted.ReplaceAllStringFunc(msg, func(q string) string {
		s, err := strconv.Unquote(q)
		if err != nil {
			return q
		}
		return quoteArg(s)
	})
}

// errorText is the error without a leading "provision: " when the command
// is provision or trigger: the line names the command once.
func errorText(path []*command, err error) string {
	msg := err.Error()
	for _, c := range path {
		msg = strings.TrimPrefix(msg, c.name+": ")
		if c.errPrefix != "" {
			msg = strings.TrimPrefix(msg, c.errPrefix+": ")
		}
	}
	return msg
}

// subGuess is "; did you mean …" when a command that also has verbs
// (migrate) got an unexpected word close to one of them.
func (c *command) subGuess(pos []string) string {
	if len(c.sub) == 0 || len(pos) == 0 {
		return ""
	}
	return didYouMean(pos[0], c.childList())
}

// checkArgs checks the number of positionals against c.args: each word is
// one required argument, each [WORD] an optional one.
func (c *command) checkArgs(pos []string) error {
	words := strings.Fields(c.args)
	required := 0
	for _, w := range words {
		if !strings.HasPrefix(w, "[") {
			required++
		}
	}
	switch {
	case len(pos) > len(words) && len(words) == 0:
		return usagef("unexpected argument %s", quoteArg(pos[0]))
	case len(pos) > len(words), len(pos) < required:
		if len(words) == 1 {
			return usagef("want exactly one %s, got %d", strings.Trim(words[0], "[]"), len(pos))
		}
		return usagef("want %s, got %d arguments", c.args, len(pos))
	}
	return nil
}

// flagError prints a flag the command does not take (or a bad value) in one
// line, with a guess at the flag meant, and where the help is.
func flagError(w io.Writer, path []*command, fs *flag.FlagSet, err error) int {
	prefix := strings.TrimSpace("executor " + pathName(path))
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if guess := suggest.Closest(strings.TrimLeft(name, "-"), names); guess != "" {
			msg += fmt.Sprintf("; did you mean -%s?", guess)
		}
	}
	fmt.Fprintf(w, "%s: %s\nrun '%s -h'\n", prefix, cutQuoted(msg), prefix)
	return 2
}

// usageLine is the command's synopsis, from its FlagSet and its args.
func usageLine(path []*command) string {
	c := path[len(path)-1]
	return strings.TrimSpace(fmt.Sprintf("executor %s [flags] %s", pathName(path), c.args))
}

// printCommandHelp writes the help of a command that runs: its usage line,
// summary, every flag its FlagSet defines, its note and its verbs.
func printCommandHelp(w io.Writer, path []*command, fs *flag.FlagSet) {
	c := path[len(path)-1]
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", usageLine(path), c.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if c.note != "" {
		fmt.Fprintf(w, "\n%s\n", c.note)
	}
	if len(c.sub) > 0 {
		printChildren(w, c, path)
	}
}

// printGroupHelp writes the help of a group (or of the executor itself):
// its verbs with their summaries, and the global flags at the top.
func printGroupHelp(w io.Writer, c *command, path []*command, global *flag.FlagSet) {
	if len(path) == 0 {
		fmt.Fprintln(w, "usage: executor [-config FILE] COMMAND [flags] [args]")
	} else {
		fmt.Fprintf(w, "usage: executor %s SUBCOMMAND [flags] [args]\n\n%s\n", pathName(path), c.summary)
	}
	printChildren(w, c, path)
	if len(path) == 0 {
		fmt.Fprintln(w, "\nglobal flags:")
		global.SetOutput(w)
		global.PrintDefaults()
		global.SetOutput(io.Discard)
	}
}

func printChildren(w io.Writer, c *command, path []*command) {
	width := 0
	for _, s := range c.sub {
		width = max(width, len(s.name))
	}
	fmt.Fprintln(w, "\ncommands:")
	for _, s := range c.sub {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.summary)
	}
	fmt.Fprintf(w, "\nrun '%s COMMAND -h' for a command's flags\n", strings.TrimSpace("executor "+pathName(path)))
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments (`run demoJob -param 2`, `run -param 2 demoJob`):
// the flag package stops at the first positional, so each one is taken out
// and the rest parsed again. After a lone "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// addJSON adds -json, for the commands that print JSON for machines.
func addJSON(fs *flag.FlagSet, jsonOut *bool) {
	fs.BoolVar(jsonOut, "json", false, "print JSON instead of text")
}

// printJSON writes v as indented JSON, for -json output.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
