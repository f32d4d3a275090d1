// Command executor is an XXL-JOB executor whose jobs close unpaid orders on
// time. `executor` (or `executor serve`) registers with the admin and serves
// the protocol; other subcommands run one job, migrate the schema, load demo
// data, or operate on dead letters, delayed tasks and the admin's jobs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
