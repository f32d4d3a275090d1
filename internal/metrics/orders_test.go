package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/schema"
)

// The overdue gauges and orders_dead_letters are sampled per order
// source: each unit's overdue orders under its source and table, each
// database's letters under its source. mysql.dsn's database is read on
// the sampler "orders", another source's on a sampler of its own, which
// keeps failing alone while its database does not answer: the others'
// gauges stay fresh.
func TestOrderGaugesPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, s1 := dbtest.New(t), dbtest.New(t)
	_, err := s1.ExecContext(ctx, "CREATE TABLE order_info_1 LIKE order_info")
	require.NoError(t, err)
	ordertest.Order(t, home.DB, ordertest.OrderOpts{OrderNo: "H-9", Age: time.Hour})
	ordertest.Order(t, s1.DB, ordertest.OrderOpts{OrderNo: "S1-8", Age: 2 * time.Hour})
	ordertest.Order(t, s1.DB, ordertest.OrderOpts{OrderNo: "S1-9", Age: time.Hour})
	ordertest.Order(t, s1.DB, ordertest.OrderOpts{OrderNo: "S1-new"}) // not due
	ordertest.DeadLetter(t, s1.DB, "S1-1", "order_info_1")
	ordertest.DeadLetter(t, s1.DB, "S1-2", "")
	ordertest.DeadLetter(t, home.DB, "H-1", "order_info")
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closerOn := func(db *sqlx.DB, source, table string) *orders.Closer {
		sch, err := schema.Default().ForTable(table)
		require.NoError(t, err)
		c, err := orders.NewCloser(db, locker, orders.CloserConfig{SourceName: source, Schema: sch})
		require.NoError(t, err)
		return c
	}
	down := downDB(t)
	homeUnit := closerOn(home.DB, orders.DefaultSourceName, "order_info")
	s1Units := []*orders.Closer{closerOn(s1.DB, "s1", "order_info"), closerOn(s1.DB, "s1", "order_info_1")}
	downUnit := closerOn(down, "down", "order_info")

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond})
	units := []*orders.Closer{homeUnit, s1Units[0], s1Units[1], downUnit}
	m.WatchOrders(units, units)
	s := scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.OrdersOverdueUnpaid, "source", "default", "table", "order_info"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersOverdueUnpaid, "source", "s1", "table", "order_info"))
	require.Equal(t, 0.0, value(t, s, metrics.OrdersOverdueUnpaid, "source", "s1", "table", "order_info_1"))
	require.InDelta(t, 90*60, value(t, s, metrics.OrdersOverdueOldestAge, "source", "s1", "table", "order_info"), 60)
	require.InDelta(t, 30*60, value(t, s, metrics.OrdersOverdueOldestAge, "source", "default", "table", "order_info"), 60)
	require.Equal(t, 0.0, value(t, s, metrics.OrdersOverdueOldestAge, "source", "s1", "table", "order_info_1"))
	require.Equal(t, 1.0, value(t, s, metrics.OrdersDeadLetters, "source", "default", "stage", "close", "status", "waiting"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersDeadLetters, "source", "s1", "stage", "close", "status", "waiting"))
	require.Equal(t, 0.0, value(t, s, metrics.OrdersDeadLetters, "source", "s1", "stage", "close", "status", "parked"))
	for _, n := range []string{metrics.OrdersOverdueUnpaid, metrics.OrdersOverdueOldestAge, metrics.OrdersDeadLetters} {
		_, ok := s.Value(n, "source", "down")
		require.False(t, ok, "no %s of a source never read", n)
	}

	// s1 is read again while down keeps failing.
	_, err = s1.ExecContext(ctx, "INSERT INTO order_info_1 SELECT * FROM order_info WHERE order_no = 'S1-9'")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return value(t, scrape(t, m), metrics.OrdersOverdueUnpaid, "source", "s1", "table", "order_info_1") == 1
	}, 5*time.Second, 5*time.Millisecond)
	s = scrape(t, m)
	require.Positive(t, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:down"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:s1"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders"))
}
