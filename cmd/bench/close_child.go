package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/orders"
)

func init() {
	addBench("close-child", benchmark{
		summary: "run one close sweep over -dsn (the bench's stand-in for `executor run orderTimeoutCloseJob`)",
		run:     closeChild,
		hidden:  true,
	})
}

// closeChild is the fallback child of the RSS measurement: the same Closer
// the executor's handler runs, in a process of its own, printing the run's
// summary line.
func closeChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench close-child", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "database DSN")
	addr := fs.String("redis", "127.0.0.1:6379", "Redis address")
	prefix := fs.String("prefix", "", "lock key prefix")
	pageSize := fs.Int("page-size", 500, "page size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := sqlx.Open("mysql", *dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	c, err := newCloser(db, rdb, *prefix, *pageSize, nil)
	if err != nil {
		return err
	}
	st, err := c.Run(ctx, orders.RunOptions{})
	fmt.Fprintln(stdout, st.String())
	return err
}

// childRun is what a child drain reported.
type childRun struct {
	how     string // what ran: the executor binary or the bench's own child mode
	wall    time.Duration
	peakMiB float64
	summary string // the run's summary line (last line of its output)
}

// executorBinary resolves -executor: a path is used as is; "auto" builds
// ./cmd/executor into dir (go build from the current module); "self" or a
// failed build means the bench's own child mode.
func executorBinary(ctx context.Context, flagValue, dir string, log io.Writer) (string, bool) {
	switch flagValue {
	case "self", "":
		return "", false
	case "auto":
		bin := filepath.Join(dir, "executor")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/executor")
		out, err := cmd.CombinedOutput()
		if err != nil {
			fmt.Fprintf(log, "note: could not build ./cmd/executor (%v: %s); measuring the bench's own child mode, which runs the same Closer\n",
				err, strings.TrimSpace(string(out)))
			return "", false
		}
		return bin, true
	default:
		return flagValue, true
	}
}

// drainInChild drains the database at dsn with one shard in a child process
// and measures the child's peak RSS (getrusage ru_maxrss of the waited-for
// child). With an executor binary the child is `executor run
// orderTimeoutCloseJob -shard 0/1`, configured through its environment;
// otherwise it is `bench close-child`.
func drainInChild(ctx context.Context, executor string, dsn, redisAddr, prefix string, pageSize int, dir string) (childRun, error) {
	var cmd *exec.Cmd
	var how string
	if executor != "" {
		cmd = exec.CommandContext(ctx, executor, "run", "orderTimeoutCloseJob", "-shard", "0/1")
		cmd.Env = append(os.Environ(),
			"MYSQL_DSN="+dsn,
			"MYSQL_MAX_OPEN_CONNS=16",
			"REDIS_ADDR="+redisAddr,
			"REDIS_MODE=single",
			"REDIS_LOCK_NODES=",
			"ORDER_CLOSE_LOCK_KEY_PREFIX="+prefix,
			"ORDER_CLOSE_PAGE_SIZE="+strconv.Itoa(pageSize),
			"LOG_LEVEL=warn",
			"XXL_JOB_EXECUTOR_LOGPATH="+filepath.Join(dir, "logs"),
		)
		how = "executor run orderTimeoutCloseJob (" + executor + ")"
	} else {
		self, err := os.Executable()
		if err != nil {
			return childRun{}, err
		}
		cmd = exec.CommandContext(ctx, self, "close-child", "-dsn", dsn, "-redis", redisAddr,
			"-prefix", prefix, "-page-size", strconv.Itoa(pageSize))
		how = "bench close-child (same Closer, fallback)"
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := childRun{how: how, wall: time.Since(start), summary: lastLine(out.String())}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.peakMiB = float64(ru.Maxrss) / 1024 // ru_maxrss is in KiB on Linux
		}
	}
	if err != nil {
		return r, errors.Join(fmt.Errorf("child %s: %w", how, err), errors.New(strings.TrimSpace(lastLines(errOut.String(), 5))))
	}
	return r, nil
}

func lastLine(s string) string { return lastLines(s, 1) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
