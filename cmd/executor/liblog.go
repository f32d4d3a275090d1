package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// libLog takes a client library's own logging, which it would write to the
// process's stderr in a format of its own, and hands it to the command's
// logger at debug level with a component attribute: go-redis's dial
// failures and pool retries, go-sql-driver/mysql's read errors (a
// connection reset mid-handshake). With a server down, a command prints
// its error, not the client's lines beside it; serve's log (JSON or text)
// carries them, at debug, with a level and a component like its own.
type libLog struct {
	component string
	log       atomic.Pointer[slog.Logger]
}

// The libraries' loggers, set before main runs: the MySQL driver copies
// its logger into each DSN's settings as they are parsed.
var (
	redisLog = installRedisLog()
	mysqlLog = installMySQLLog()
)

func newLibLog(component string) *libLog {
	l := &libLog{component: component}
	l.use(slog.New(slog.DiscardHandler))
	return l
}

func installRedisLog() *libLog {
	l := newLibLog("go-redis")
	redis.SetLogger(l)
	return l
}

func installMySQLLog() *libLog {
	l := newLibLog("go-sql-driver/mysql")
	_ = mysql.SetLogger(l) // refuses only a nil logger
	return l
}

// useLibLogger sends the libraries' lines to logger from now on.
func useLibLogger(logger *slog.Logger) {
	redisLog.use(logger)
	mysqlLog.use(logger)
}

// use sends the library's lines to logger from now on.
func (l *libLog) use(logger *slog.Logger) { l.log.Store(logger) }

// Printf is go-redis's Logging.
func (l *libLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Load().DebugContext(ctx, fmt.Sprintf(format, v...), "component", l.component)
}

// Print is go-sql-driver/mysql's Logger; the driver's lines start with
// the file and line that logged them ("packets.go:58 ").
func (l *libLog) Print(v ...any) {
	l.log.Load().Debug(fmt.Sprint(v...), "component", l.component)
}
