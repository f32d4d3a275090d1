package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/rabbittest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/xxljob"
)

// jobsOf is an executor named app with d's job handlers, run with RunOnce
// (no admin answers it).
func jobsOf(t *testing.T, d *Deps, app string) *xxljob.Executor {
	t.Helper()
	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: app, LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, handlers.Register(exec, d.HandlerDeps()))
	return exec
}

// deadAddr is a port nothing answers on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// loadEnv loads a configuration from env alone.
func loadEnv(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	return cfg
}

// Two order databases as two sources, mysql.dsn being the first, and a
// third source that does not answer. A task registered in an order's
// transaction in the second database is dispatched by that database's
// own dispatcher, on timer keys of its own, and closes the order in the
// table its payload names; mysql.dsn's tasks keep the keys they always
// had; the source down neither stops serve's start nor the others. The
// sweep job covers the second database too and fails naming the one down.
func TestDelayedTasksOfEverySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	cfg := loadEnv(t, map[string]string{"MYSQL_DSN": home.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:",
		"ORDER_SOURCES": fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info_{0..1}"}, {name: gone, dsn: "root@tcp(%s)/x?timeout=1s", tables: order_info}]`,
			home.DSN, other.DSN, deadAddr(t))})
	ids := map[string]int64{}
	for _, no := range []string{"B-1", "B-2", "B-3"} {
		ids[no] = ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: no, Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 1}}}).ID
	}
	_, err := orderdemo.SplitTables(ctx, other.DB, 2)
	require.NoError(t, err)
	tableOf := func(no string) string { return fmt.Sprintf("order_info_%d", ids[no]%2) }
	ordertest.Order(t, home.DB, ordertest.OrderOpts{OrderNo: "H-1", Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})

	var logged syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	d, err := Open(ctx, cfg, logger, Observers{})
	require.NoError(t, err)
	defer d.Close()
	var names []string
	for _, s := range d.delaySources {
		names = append(names, s.name)
	}
	require.Equal(t, []string{"b", "gone"}, names, "a is on mysql.dsn's database, served by its dispatcher")
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	require.Equal(t, DelayKeys{prefix + "delay:", "delay."}, DelayKeysOf(cfg, srcs[0]))
	require.Equal(t, DelayKeys{prefix + "delay:source:b:", "delay.source.b."}, DelayKeysOf(cfg, srcs[1]))
	also := srcs[1]
	also.Name = "b2" // another source on b's database: its dispatcher is b's
	require.Equal(t, DelayKeysOf(cfg, srcs[1]), DelayKeysOf(cfg, also))
	b := d.delaySources[0].delay
	tasks, err := d.sourcedTasks(cfg) // the API's ?source=
	require.NoError(t, err)
	require.Same(t, d.delay.Client(), tasks.Home)
	require.Same(t, tasks.Home, tasks.By["a"])
	require.Same(t, b.Client(), tasks.By["b"])
	require.Same(t, d.delaySources[1].delay.Client(), tasks.By["gone"])

	// Missed by the timer (registered without one): the sweep job finds it
	// in b's database, and fails the run naming the source down.
	blind, err := delay.NewClient(other.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	_, _, err = blind.Register(ctx, delay.OrderTimeoutCloseIn(tableOf("B-1"), "B-1", time.Now().Add(-time.Minute)))
	require.NoError(t, err)
	exec := jobsOf(t, d, "delay-sources-test")
	res, err := exec.RunOnce(ctx, handlers.DelayTaskSweepJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeFail, res.Code)
	require.Contains(t, res.Msg, "found=1 claimed=1 done=1")
	require.Contains(t, res.Msg, "source gone: ")
	delaytest.WaitStatus(t, other, "order-timeout-B-1", "DONE")

	cs := NewComponents(logger)
	for _, c := range d.delayComponents(logger) {
		cs.Add(c.name, c.Component)
	}
	require.NoError(t, cs.Start(ctx), "a source down does not stop serve")
	defer func() { require.NoError(t, cs.Stop(ctx)) }()
	require.Contains(t, logged.String(), "delayed tasks of order source gone could not start; trying again in the background")

	// Registered in the order's transaction, in the order's database.
	tx, err := other.Beginx()
	require.NoError(t, err)
	tk, _, err := b.Client().RegisterTx(ctx, tx, delay.OrderTimeoutCloseIn(tableOf("B-2"), "B-2", time.Now()))
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.NoError(t, b.Client().Schedule(ctx, tk))
	_, _, err = d.delay.Client().Register(ctx, delay.OrderTimeoutClose("H-1", time.Now()))
	require.NoError(t, err)
	delaytest.WaitStatus(t, other, "order-timeout-B-2", "DONE")
	delaytest.WaitStatus(t, home, "order-timeout-H-1", "DONE")
	for _, no := range []string{"B-1", "B-2"} {
		require.Equal(t, 1, other.Count(t, `SELECT COUNT(*) FROM `+tableOf(no)+` WHERE order_no = ? AND status = 2`, no), no)
	}
	require.Equal(t, 1, home.Count(t, `SELECT COUNT(*) FROM order_info WHERE order_no = 'H-1' AND status = 2`))

	// Each database's tasks wait on their own timer keys (members are
	// task ids, scores due times).
	later := time.Now().Add(time.Hour)
	tb, _, err := b.Client().Register(ctx, delay.OrderTimeoutCloseIn(tableOf("B-3"), "B-3", later))
	require.NoError(t, err)
	th, _, err := d.delay.Client().Register(ctx, delay.Registration{BizUUID: "home-later", Handler: delay.OrderTimeoutCloseHandler,
		ExecuteTime: later.Add(time.Minute), Payload: delay.OrderTimeoutPayload{OrderNo: "H-2"}})
	require.NoError(t, err)
	score := func(key string, id int64) float64 {
		v, err := rdb.ZScore(ctx, prefix+key, fmt.Sprint(id)).Result()
		require.NoError(t, err, "task %d in %s", id, key)
		return v
	}
	require.InDelta(t, float64(tb.ExecuteTime.UnixMilli()), score("delay:source:b:timer", tb.ID), 0)
	require.InDelta(t, float64(th.ExecuteTime.UnixMilli()), score("delay:timer", th.ID), 0)
	require.NotEqual(t, float64(tb.ExecuteTime.UnixMilli()), rdb.ZScore(ctx, prefix+"delay:timer", fmt.Sprint(tb.ID)).Val())
}

// Without order.sources there is one dispatcher, on mysql.dsn's database
// and the keys it always had.
func TestDelayedTasksHomeOnly(t *testing.T) {
	t.Parallel()
	home := dbtest.New(t)
	_, prefix := redistest.Client(t)
	cfg := loadEnv(t, map[string]string{"MYSQL_DSN": home.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:"})
	d, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	require.Empty(t, d.delaySources)
	require.Len(t, d.delayComponents(slog.New(slog.DiscardHandler)), 1)
	tasks, err := d.sourcedTasks(cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]*delay.Client{"default": d.delay.Client()}, tasks.By)
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	require.Equal(t, DelayKeys{prefix + "delay:", "delay."}, DelayKeysOf(cfg, srcs[0]))
}

// With delay.timer rabbitmq each database's tasks hop through queues of
// their own: mysql.dsn's under delay.rabbitmq.prefix as before, source
// b's under {prefix}source.b.; a task of b's database closes its order.
func TestDelayedTasksOfASourceOnRabbitMQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	_, prefix := redistest.Client(t)
	rprefix := rabbittest.Prefix(t)
	cfg := loadEnv(t, map[string]string{"MYSQL_DSN": home.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:", "DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": rabbittest.URL(), "DELAY_RABBITMQ_PREFIX": rprefix,
		"ORDER_SOURCES": fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: order_info}]`, home.DSN, other.DSN)})
	ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: "R-1", Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	cs := NewComponents(slog.New(slog.DiscardHandler))
	for _, c := range d.delayComponents(slog.New(slog.DiscardHandler)) {
		cs.Add(c.name, c.Component)
	}
	require.NoError(t, cs.Start(ctx))
	defer func() { require.NoError(t, cs.Stop(ctx)) }()

	b := d.delaySources[0]
	require.Equal(t, "b", b.name)
	require.Eventually(t, func() bool { return b.rabbit.Stats().Connected && d.rabbit.Stats().Connected }, delaytest.WaitLong, 10*time.Millisecond)
	_, _, err = b.delay.Client().Register(ctx, delay.OrderTimeoutClose("R-1", time.Now()))
	require.NoError(t, err)
	delaytest.WaitStatus(t, other, "order-timeout-R-1", "DONE")
	require.Equal(t, 1, other.Count(t, `SELECT COUNT(*) FROM order_info WHERE order_no = 'R-1' AND status = 2`))

	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	for _, q := range []string{rprefix + "ready", rprefix + "source.b.ready"} {
		ch, err := conn.Channel()
		require.NoError(t, err)
		_, err = ch.QueueDeclarePassive(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
		require.NoError(t, err, "queue %s", q)
		require.NoError(t, ch.Close())
	}
}

// flaky fails its first fails Starts, as a dispatcher whose database is
// down until it comes back.
type flaky struct {
	mu               sync.Mutex
	fails, starts    int
	started, stopped bool
}

func (f *flaky) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.starts <= f.fails {
		return errors.New("dial tcp: connection refused")
	}
	f.started = true
	return nil
}

func (f *flaky) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	return nil
}

// A dispatcher whose database does not answer at serve's start is started
// in the background once it answers, and stopped with the rest.
func TestLateStartStartsOnceItCan(t *testing.T) {
	t.Parallel()
	var logged syncbuf.Buffer
	f := &flaky{fails: 3}
	s := &lateStart{name: "delayed tasks of order source b", c: f, log: slog.New(slog.NewTextHandler(&logged, nil)), every: time.Millisecond}
	require.NoError(t, s.Start(t.Context()))
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.started }, delaytest.WaitLong, time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logged.String(), `msg="delayed tasks of order source b started"`) },
		delaytest.WaitLong, time.Millisecond)
	require.Contains(t, logged.String(), `msg="delayed tasks of order source b could not start; trying again in the background"`)
	require.NoError(t, s.Stop(t.Context()))
	require.Equal(t, 4, f.starts)
	require.True(t, f.stopped)
}
