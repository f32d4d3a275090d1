package metrics_test

import (
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
)

// orders_dead_letters is sampled per order source, each database's
// letters under its name: mysql.dsn's with the overdue gauges, another
// source's on a sampler of its own, which keeps failing alone while its
// database does not answer.
func TestDeadLetterGaugesPerSource(t *testing.T) {
	t.Parallel()
	home, s1 := dbtest.New(t), dbtest.New(t)
	ordertest.DeadLetter(t, s1.DB, "S1-1", "order_info_1")
	ordertest.DeadLetter(t, s1.DB, "S1-2", "")
	ordertest.DeadLetter(t, home.DB, "H-1", "order_info")
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closerOn := func(db *sqlx.DB, source string) *orders.Closer {
		c, err := orders.NewCloser(db, locker, orders.CloserConfig{SourceName: source})
		require.NoError(t, err)
		return c
	}
	down := sqlx.MustOpen("mysql", "root@tcp(127.0.0.1:1)/down?parseTime=true&timeout=2s")
	t.Cleanup(func() { down.Close() })
	homeCloser := closerOn(home.DB, orders.DefaultSourceName)

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond})
	m.WatchCloser(homeCloser, homeCloser, closerOn(s1.DB, "s1"), closerOn(down, "down"))
	s := scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.OrdersDeadLetters, "source", "default", "stage", "close", "status", "waiting"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersDeadLetters, "source", "s1", "stage", "close", "status", "waiting"))
	require.Equal(t, 0.0, value(t, s, metrics.OrdersDeadLetters, "source", "s1", "stage", "close", "status", "parked"))
	_, ok := s.Value(metrics.OrdersDeadLetters, "source", "down")
	require.False(t, ok, "no gauge of a source never read")
	s = scrape(t, m) // the error counters are collected beside the samplers: counted by the next scrape
	require.Positive(t, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:down"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders:s1"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "orders"))
}
