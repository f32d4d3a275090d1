package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/xxljob"
)

func runCommand() *command {
	return &command{name: "run", args: "HANDLER", flags: runFlags,
		summary: "run one handler once in-process, print its run log, exit 0 on success and 1 otherwise"}
}

func runFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	param := fs.String("param", "", "job param, as typed in the console")
	shard := fs.String("shard", "0/1", "shard index/total, 0 <= index < total")
	return func(ctx context.Context, pos []string) error {
		idx, total, err := parseShard(*shard)
		if err != nil {
			return usagef("%v", err)
		}
		if err := checkHandler(pos[0]); err != nil {
			return err
		}
		return runOnce(ctx, env, pos[0], *param, idx, total)
	}
}

// checkHandler refuses, as a usage error, a handler name the binary does
// not have (run and trigger), listing those it has with a guess.
func checkHandler(name string) error {
	if known := handlers.Names(); !slices.Contains(known, name) {
		return usagef("unknown handler %s; the handlers are: %s%s", quoteArg(name), strings.Join(known, ", "), didYouMean(name, known))
	}
	return nil
}

// runOnce runs handler name once in-process, its run log on stdout.
func runOnce(ctx context.Context, env *cliEnv, name, param string, idx, total int) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	logger := app.NewLogger(cfg, env.stderr) // stdout carries the run log here
	useLibLogger(logger)
	app.LogNotices(logger, cfg)

	var deps *handlers.Deps
	if name != handlers.DemoJob {
		d, err := app.Open(ctx, cfg, logger, app.Observers{})
		if err != nil {
			return err
		}
		defer d.Close()
		deps = d.HandlerDeps()
	}
	xcfg := app.ExecutorConfig(cfg, logger)
	xcfg.OpenWithoutToken = true // run never listens: RunOnce runs the handler here
	exec, err := xxljob.New(xcfg)
	if err != nil {
		return err
	}
	if err := handlers.Register(exec, deps); err != nil {
		return err
	}
	res, err := exec.RunOnce(ctx, name, param, idx, total, env.stdout)
	if err != nil {
		return err
	}
	if res.Code != xxljob.CodeSuccess {
		fmt.Fprintf(env.stderr, "executor run: %s ended with code %d: %s\n", name, res.Code, firstLine(res.Msg))
		return exitError{code: 1}
	}
	return nil
}

// maxShardTotal is the largest shard total: the admin sends shard totals
// as Java ints, the close cursor keeps them in an INT column, and the
// shard hash (a 32-bit hash times N) must fit 64 bits. -shard 1/99999999999
// failed the run with the server's "BIGINT UNSIGNED value is out of range".
const maxShardTotal = math.MaxInt32

// parseShard parses "I/N" with 0 <= I < N <= maxShardTotal.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("-shard %s: want I/N, e.g. 0/1", quoteArg(s))
	}
	if n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("-shard %q: need 0 <= I < N", s)
	}
	if n > maxShardTotal {
		return 0, 0, fmt.Errorf("-shard %q: N is at most %d (the admin's largest shard total)", s, maxShardTotal)
	}
	return i, n, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
