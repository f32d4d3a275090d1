package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// goRedisLog takes go-redis's own logging (dial failures and pool retries,
// which it would write to the process's stderr in a format of its own) and
// hands it to the command's logger at debug level: with Redis down, a
// command prints its error, not eight lines of the client's retries.
type goRedisLog struct{ log atomic.Pointer[slog.Logger] }

var redisLog = newGoRedisLog()

func newGoRedisLog() *goRedisLog {
	g := &goRedisLog{}
	g.use(slog.New(slog.DiscardHandler))
	redis.SetLogger(g)
	return g
}

// use sends go-redis's lines to logger from now on.
func (g *goRedisLog) use(logger *slog.Logger) { g.log.Store(logger) }

func (g *goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	g.log.Load().DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
