package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/internal/ordertest"
)

// With order.sources every unit the close sweeps has its overdue gauges,
// labelled with its source and table, read on its source's sampler: a
// source that does not answer leaves the others' gauges there. mysql.dsn's
// own order table is no unit, so it has none; its letters are sampled.
func TestOverdueGaugesPerUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	createTables(t, other, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_item_1 LIKE order_item")
	ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: "B-1", Age: time.Hour})
	ordertest.Order(t, home.DB, ordertest.OrderOpts{OrderNo: "H-1", Age: time.Hour})
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info, order_info_1"}]`, deadDSN(t), other.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()

	scrape := serveMetrics(t, d)
	s := scrape()
	require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info"))
	require.InDelta(t, 30*60, seriesValue(t, s, metrics.OrdersOverdueOldestAge, "source", "b", "table", "order_info"), 60)
	require.Equal(t, 0.0, seriesValue(t, s, metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info_1"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.OrdersDeadLetters, "source", "default", "stage", "close", "status", "waiting"))
	for _, src := range []string{"a", "default"} {
		_, ok := s.Value(metrics.OrdersOverdueUnpaid, "source", src)
		require.False(t, ok, "no overdue gauge of source %s", src)
	}
	s = scrape() // the error counters are collected beside the samplers: counted by the next scrape
	require.Positive(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:a"))
	require.Zero(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:b"))
	require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info"), "b's gauges stay while a fails")
}

// With order.sources the gauges read per order database (delayed tasks,
// refunds owed) are exported for mysql.dsn's ("default": no source is on
// it) and each other source's, labelled with its source and read on a
// sampler of its own: a source that does not answer fails its own
// sampler alone. Every pool's statistics carry the source it serves.
func TestDatabaseGaugesPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, maxOpenConns: 3, tables: order_info}]`, deadDSN(t), other.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	tasks, err := delay.NewClient(other.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	for _, id := range []string{"b-1", "b-2"} {
		_, _, err := tasks.Register(ctx, delay.Registration{BizUUID: id, Handler: "x", ExecuteTime: time.Now().Add(-time.Minute)})
		require.NoError(t, err)
	}
	_, err = other.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at) VALUES ('wx-1', 'B-1', 9.90, NOW(3))`)
	require.NoError(t, err)

	scrape := serveMetrics(t, d)
	s := scrape()
	require.Equal(t, 2.0, seriesValue(t, s, metrics.DelayTasksDue, "source", "b"))
	require.Equal(t, 2.0, seriesValue(t, s, metrics.DelayTasks, "source", "b", "status", "PENDING"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.DelayTasksDue, "source", "default"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.DelayClaimsTotal, "source", "a"))
	require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersRefundsOwed, "source", "b"))
	require.InDelta(t, 9.90, seriesValue(t, s, metrics.OrdersRefundsOwedAmount, "source", "b"), 1e-9)
	require.Equal(t, 0.0, seriesValue(t, s, metrics.OrdersRefundsOwed, "source", "default"))
	for _, n := range []string{metrics.DelayTasksDue, metrics.OrdersRefundsOwed} {
		_, ok := s.Value(n, "source", "a")
		require.False(t, ok, "no %s of a source never read", n)
	}
	require.Equal(t, 3.0, seriesValue(t, s, "go_sql_max_open_connections", "source", "b", "db_name", "orders"))
	require.Positive(t, seriesValue(t, s, "go_sql_open_connections", "source", "b"))
	require.Equal(t, float64(cfg.MySQL.MaxOpenConns), seriesValue(t, s, "go_sql_max_open_connections", "source", "a"))
	require.Equal(t, float64(cfg.MySQL.MaxOpenConns), seriesValue(t, s, "go_sql_max_open_connections", "source", "default"))

	s = scrape() // the error counters are collected beside the samplers: counted by the next scrape
	require.Positive(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "delay:a"))
	require.Zero(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "delay:b"))
	require.Zero(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "delay"))
	require.Positive(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "refunds:a"))
	require.Zero(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "refunds:b"))
	require.Zero(t, seriesValue(t, s, metrics.SamplerErrorsTotal, "sampler", "refunds"))
	require.Equal(t, 2.0, seriesValue(t, s, metrics.DelayTasksDue, "source", "b"), "b's gauges stay while a fails")
	require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersRefundsOwed, "source", "b"), "b's gauges stay while a fails")
}

// A source on mysql.dsn's database shares its delayed-task and refunds
// series, labelled with the source's name as its relay is; mysql.dsn's
// own pool is "default" beside the source's pool.
func TestDatabaseGaugesOfASourceOnHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: b, dsn: %q, tables: order_info}, {name: c, dsn: %q, tables: order_info}]`, other.DSN, home.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	_, err = home.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at) VALUES ('wx-1', 'H-1', 1, NOW(3))`)
	require.NoError(t, err)

	s := serveMetrics(t, d)()
	require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersRefundsOwed, "source", "c"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.OrdersRefundsOwed, "source", "b"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.DelayTasksDue, "source", "c"))
	require.Equal(t, 0.0, seriesValue(t, s, metrics.DelayTasksDue, "source", "b"))
	for _, n := range []string{metrics.DelayTasksDue, metrics.OrdersRefundsOwed} {
		_, ok := s.Value(n, "source", "default")
		require.False(t, ok, "mysql.dsn's %s is c's", n)
	}
	for _, src := range []string{"default", "b", "c"} {
		seriesValue(t, s, "go_sql_max_open_connections", "source", src)
	}
}

// What is mysql.dsn's alone is named "default" unless an order source
// is: then "mysql.dsn", and both are exported side by side, in outbox
// mode too.
func TestDefaultName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "default", homeName(nil))
	require.Equal(t, "default", defaultName([]sourceDB{{name: "a", home: true}}))
	require.Equal(t, "a", homeName([]sourceDB{{name: "b"}, {name: "a", home: true}}))

	home, other := dbtest.New(t), dbtest.New(t)
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, map[string]string{"ORDER_COMPENSATION_MODE": "outbox",
		"ORDER_COMPENSATION_INVENTORY_URL": "http://127.0.0.1:1/stock", "ORDER_COMPENSATION_COUPON_URL": "http://127.0.0.1:1/coupon"},
		fmt.Sprintf(`[{name: default, dsn: %q, tables: order_info}]`, other.DSN)))
	require.NoError(t, err)
	d, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	s := serveMetrics(t, d)()
	for _, src := range []string{"mysql.dsn", "default"} {
		seriesValue(t, s, metrics.DelayTasksDue, "source", src)
		seriesValue(t, s, metrics.OrdersRefundsOwed, "source", src)
		seriesValue(t, s, metrics.OutboxPending, "source", src)
		seriesValue(t, s, "go_sql_max_open_connections", "source", src)
	}
}

// serveMetrics serves the metrics serve watches of d (watchServe), read
// from the database at every scrape, and returns a scrape of them.
func serveMetrics(t *testing.T, d *Deps) func() metricstest.Samples {
	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond, DelaySampleInterval: time.Millisecond})
	watchServe(m, nil, d)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return func() metricstest.Samples { return metricstest.Scrape(t, srv.URL) }
}

// seriesValue is the value of the series of name with labels in s, which
// must have it.
func seriesValue(t *testing.T, s metricstest.Samples, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.Value(name, labels...)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}
