// Command bench measures the executor against the local MariaDB and Redis:
// `bench close` (order-close throughput against the naive and seed baselines),
// `bench delay` (delayed-task lateness) and `bench register` (delayed-task
// registrations). Each works in a database of its own that it creates and
// drops, and never touches others.
package main

import (
	"context"
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
}

var benchmarks = map[string]benchmark{}

func addBench(name string, b benchmark) {
	if _, dup := benchmarks[name]; dup {
		panic("bench: registered twice: " + name)
	}
	benchmarks[name] = b
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: bench <benchmark> [flags]")
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
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
	if err := b.run(ctx, args[1:], stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
