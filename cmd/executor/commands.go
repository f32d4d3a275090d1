package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/orderjob/executor/sql/migrations"
)

// command is one subcommand. Each lives in its own file and adds itself to
// the table with register, so the dispatcher never changes when one is added.
type command struct {
	name    string
	usage   string // one line: arguments
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what every subcommand gets: the global -config value and the
// streams (stdout for results and run logs, stderr for the process log).
type cliEnv struct {
	configPath string
	stdout     io.Writer
	stderr     io.Writer
	badFlags   bool // a flag set rejected its input (and printed its usage)
}

// exitError carries a specific exit code (e.g. 1 for a failed run) without
// printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError marks bad command-line input: the message is printed with the
// command's usage and the exit code is 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("executor: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// run parses the global flags, picks the subcommand (serve by default) and
// maps its error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cliEnv{stdout: stdout, stderr: stderr}
	global := flag.NewFlagSet("executor", flag.ContinueOnError)
	global.SetOutput(stderr)
	global.StringVar(&env.configPath, "config", "", "config file, YAML or .properties (optional; environment variables win over it)")
	global.Usage = func() { printUsage(stderr, global) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := global.Args()
	if len(rest) == 0 {
		// No default command: a bare `executor` must not start serving
		// against the built-in defaults by surprise.
		fmt.Fprintln(stderr, "executor: want a command (`executor serve` to run the executor)")
		fmt.Fprintln(stderr)
		printUsage(stderr, global)
		return 2
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		printUsage(stdout, global)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "executor: unknown command %q\n\n", name)
		printUsage(stderr, global)
		return 2
	}
	err := c.run(ctx, env, rest)
	if err != nil && env.badFlags && !errors.Is(err, flag.ErrHelp) {
		return 2 // the flag package has printed the problem and the usage
	}
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "executor %s: %s\nusage: executor [-config FILE] %s %s\n", c.name, ue.msg, c.name, c.usage)
		return 2
	default:
		fmt.Fprintf(stderr, "executor %s: %v\n", c.name, migrations.Explain(err))
		return 1
	}
}

func printUsage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprintln(w, "usage: executor [-config FILE] command [flags]")
	fmt.Fprintln(w, "\ncommands (each with -h for its flags):")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  %-12s %s\n               %s\n", n, c.summary, strings.TrimSpace(n+" "+c.usage))
	}
	fmt.Fprintln(w, "\nglobal flags:")
	global.SetOutput(w)
	global.PrintDefaults()
}

// newFlagSet makes a subcommand's flag set that reports errors instead of
// exiting, and accepts -config there too (so it may follow the command).
func newFlagSet(env *cliEnv, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("executor "+name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.StringVar(&env.configPath, "config", env.configPath, "config file, YAML or .properties")
	fs.Usage = func() {
		env.badFlags = true
		fmt.Fprintf(env.stderr, "usage: executor [-config FILE] %s\n", usageLine(name))
		fs.PrintDefaults()
	}
	return fs
}

// verbUsages holds the usage line of each verb of the commands with verbs,
// keyed "command verb"; dispatchSub fills it.
var verbUsages = map[string]string{}

// usageLine is "NAME ARGS" for a command or a "command verb".
func usageLine(name string) string {
	if c, ok := commands[name]; ok {
		return strings.TrimSpace(name + " " + c.usage)
	}
	if u, ok := verbUsages[name]; ok {
		cmd, _, _ := strings.Cut(name, " ")
		return cmd + " " + u
	}
	return name
}

// parseInterleaved parses flags that may come before or after positional
// arguments (`run demoJob -param 2` and `run -param 2 demoJob`).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// subcommand is one verb of a command with verbs (tasks, deadletter); T is
// what the command hands each verb.
type subcommand[T any] struct {
	usage string
	run   func(ctx context.Context, c T, args []string) error
}

// dispatchSub runs the verb named by args[0]. order lists the verbs as the
// usage shows them.
func dispatchSub[T any](ctx context.Context, env *cliEnv, command string, table map[string]subcommand[T], order []string, c T, args []string) error {
	lines := make([]string, 0, len(order))
	for _, name := range order {
		verbUsages[command+" "+name] = table[name].usage
		lines = append(lines, "  "+command+" "+table[name].usage)
	}
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			fmt.Fprintf(env.stdout, "usage: executor [-config FILE] %s SUBCOMMAND [flags]\n%s\n(each with -h for its flags)\n",
				command, strings.Join(lines, "\n"))
			return nil
		}
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("want a subcommand:\n%s", strings.Join(lines, "\n"))
	}
	sub, ok := table[args[0]]
	if !ok {
		return usagef("unknown subcommand %q; one of:\n%s", args[0], strings.Join(lines, "\n"))
	}
	return sub.run(ctx, c, args[1:])
}

// parseVerb parses a verb's flags (before or after its positionals), adds
// -json, and checks that there are exactly n positionals (what names one).
func parseVerb(fs *flag.FlagSet, args []string, n int, what string, jsonOut *bool) ([]string, error) {
	fs.BoolVar(jsonOut, "json", false, "print JSON instead of a table")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != n {
		if n == 0 {
			return nil, usagef("unexpected argument %q", pos[0])
		}
		return nil, usagef("want exactly one %s", what)
	}
	return pos, nil
}

// printJSON writes v as indented JSON, for -json output.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
