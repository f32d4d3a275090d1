package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/xxljob"
)

// runLog is a run log kept in memory: the lines the handler writes
// through Request.Log, with a hook that sees each one as it is written.
type runLog struct {
	mu     sync.Mutex
	lines  []string
	errors []string // the lines written at ERROR
	onLine func(string)
}

func (l *runLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *runLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *runLog) WithGroup(string) slog.Handler            { return l }
func (l *runLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.lines = append(l.lines, r.Message)
	if r.Level == slog.LevelError {
		l.errors = append(l.errors, r.Message)
	}
	hook := l.onLine
	l.mu.Unlock()
	if hook != nil {
		hook(r.Message)
	}
	return nil
}

func (l *runLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// splitUnits seeds db with perTable due orders in each of 3 tables and
// returns a Closer per table, for source name.
func splitUnits(t *testing.T, db *sqlx.DB, name string, perTable int, locker *orderlock.Locker) []*orders.Closer {
	t.Helper()
	ctx := context.Background()
	_, err := orderdemo.Generate(ctx, db, orderdemo.Spec{Orders: 3 * perTable, SKUs: 20, DueFraction: 1, OrderNoPrefix: name})
	require.NoError(t, err)
	tables, err := orderdemo.SplitTables(ctx, db, 3)
	require.NoError(t, err)
	var units []*orders.Closer
	for _, table := range tables {
		sch, err := schema.Default().ForTable(table)
		require.NoError(t, err)
		c, err := orders.NewCloser(db, locker, orders.CloserConfig{SourceName: name, Schema: sch})
		require.NoError(t, err)
		units = append(units, c)
	}
	return units
}

// One run over two order databases of three tables each; one database's
// server is killed (its own mariadbd, by its pid) after its first page.
// Its units fail, the first with the connection error and a hint, the
// other two unstarted, each named in the run log; the other database's
// units all finish, every order closed once, and the run fails so the
// admin's alarm fires.
func TestOrderCloseUnitsSourceDownMidRun(t *testing.T) {
	t.Parallel()
	const perTable = 150
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	up := dbtest.New(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	downDB, _ := srv.NewDB(t, "shop")
	units := append(splitUnits(t, up.DB, "up", perTable, locker), splitUnits(t, downDB, "down", perTable, locker)...)

	log := &runLog{}
	var kill sync.Once
	log.onLine = func(line string) {
		if strings.HasPrefix(line, "down/") && strings.Contains(line, " page 1: ") {
			kill.Do(srv.Kill)
		}
	}
	req := &xxljob.Request{Param: "pageSize=10", ShardTotal: 1, Log: slog.New(log)}
	err = OrderTimeoutCloseUnits(units...).Handle(context.Background(), req)
	out := log.String()
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "units=6 failed_units=3")
	require.Contains(t, err.Error(), "3 of 6 units failed, first down/order_info_0")
	require.Contains(t, out, "orderTimeoutCloseJob executor 0/1 over 6 units pageSize=10")
	require.Regexp(t, `down/order_info_0 FAILED after scanned=\d+ closed=\d+ .*: `, out)
	require.Contains(t, out, "down/order_info_0 hint: ")
	require.Len(t, log.errors, 3, "the FAILED lines, at ERROR: %q", log.errors)
	for _, line := range log.errors {
		require.Regexp(t, `^down/order_info_\d FAILED`, line)
	}
	for _, table := range []string{"order_info_1", "order_info_2"} {
		require.Contains(t, out, fmt.Sprintf("down/%s FAILED: not started: source down cannot be reached: ", table))
	}
	for _, table := range []string{"order_info_0", "order_info_1", "order_info_2"} {
		require.Contains(t, out, fmt.Sprintf("up/%s: scanned=%d closed=%d skipped_paid=0 skipped_locked=0 dead_lettered=0", table, perTable, perTable))
		require.Equal(t, perTable, up.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"))
	}
	require.Equal(t, 3*perTable, up.Count(t, "SELECT COUNT(*) FROM order_close_log"), "each order of the source up closed once")
}
