// Command bench measures the executor against the local MariaDB and Redis:
// `bench close` (order-close throughput against two baselines: a naive UPDATE
// and one order at a time under a blocking lock),
// `bench delay` (delayed-task lateness) and `bench register` (delayed-task
// registrations). Each works in a database of its own that it creates and
// drops, and never touches others.
//
// Each benchmark lives in its own file and adds itself to the table with
// addBench in an init function, so this file never changes when one is added.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// benchmark is one subcommand; each file adds its own with addBench in init.
type benchmark struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// hidden keeps helper modes (a child process a benchmark starts of the
	// bench binary itself) out of the usage list.
	hidden bool
}

var benchmarks = map[string]benchmark{}

func addBench(name string, b benchmark) {
	if _, dup := benchmarks[name]; dup {
		panic("bench: registered twice: " + name)
	}
	benchmarks[name] = b
}

// failedError makes the bench exit 1 after it has printed its results (for
// example a broken invariant), printing only its message.
type failedError struct{ msg string }

func (e failedError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: bench <benchmark> [flags]   (bench <benchmark> -h lists its flags)")
		names := make([]string, 0, len(benchmarks))
		for n, b := range benchmarks {
			if !b.hidden {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stderr, "  %-10s %s\n", n, benchmarks[n].summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bench: unknown benchmark %q (try: bench help)\n", args[0])
		return 2
	}
	err := b.run(ctx, args[1:], stdout, stderr)
	var fe failedError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "bench %s: %s\n", args[0], fe.msg)
		return 1
	default:
		fmt.Fprintf(stderr, "bench %s: %v\n", args[0], err)
		return 1
	}
}
