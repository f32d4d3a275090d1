package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/refunds"
)

// The gauges read per order database (the delayed tasks and the refunds
// owed) are exported for each, labelled with its source: mysql.dsn's
// ("default") on the samplers "delay" and "refunds", another's on
// samplers of its own, which keep failing alone while its database does
// not answer. Each pool's statistics carry the source too.
func TestDatabaseGaugesPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, s1 := dbtest.New(t), dbtest.New(t)
	down := downDB(t)
	rdb, prefix := redistest.Client(t)
	dispatcherOn := func(db *sqlx.DB, name string) *delay.Dispatcher {
		d, err := delay.NewDispatcher(db, rdb, delay.Config{KeyPrefix: prefix + name + ":",
			Handlers: map[string]delay.HandlerFunc{"ok": func(context.Context, *delay.Task) error { return nil }}})
		require.NoError(t, err)
		return d
	}
	homeD, s1D := dispatcherOn(home.DB, "home"), dispatcherOn(s1.DB, "s1")
	register := func(d *delay.Dispatcher, n int, ago time.Duration) {
		for i := range n {
			_, _, err := d.Client().Register(ctx, delay.Registration{BizUUID: fmt.Sprintf("t-%d-%s", i, ago), Handler: "ok",
				ExecuteTime: time.Now().Add(-ago)})
			require.NoError(t, err)
		}
	}
	register(homeD, 1, time.Minute)
	register(s1D, 3, 10*time.Minute)
	conflict := func(db *dbtest.DB, payment string, amount float64, ago time.Duration) {
		_, err := db.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, created_at)
			VALUES (?, 'C-1', ?, NOW(3), NOW(3) - INTERVAL ? SECOND)`, payment, amount, int(ago.Seconds()))
		require.NoError(t, err)
	}
	conflict(home, "wx-1", 9.90, time.Hour)
	conflict(s1, "wx-2", 5, 2*time.Hour)
	conflict(s1, "wx-3", 1.5, time.Minute)

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond, DelaySampleInterval: time.Millisecond})
	m.WatchDispatcher("default", homeD)
	m.WatchDispatcher("s1", s1D)
	m.WatchDispatcher("down", dispatcherOn(down, "down"))
	s1Refunds := refunds.New(s1.DB)
	m.WatchRefunds("default", refunds.New(home.DB))
	m.WatchRefunds("s1", s1Refunds)
	m.WatchRefunds("down", refunds.New(down))
	s1.SetMaxOpenConns(3)
	m.WatchDB("default", home.DB.DB)
	m.WatchDB("s1", s1.DB.DB)
	m.WatchDB("down", down.DB)
	s := scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.DelayTasks, "source", "default", "status", "PENDING"))
	require.Equal(t, 3.0, value(t, s, metrics.DelayTasks, "source", "s1", "status", "PENDING"))
	require.Equal(t, 0.0, value(t, s, metrics.DelayTasks, "source", "s1", "status", "RUNNING"))
	require.Equal(t, 1.0, value(t, s, metrics.DelayTasksDue, "source", "default"))
	require.Equal(t, 3.0, value(t, s, metrics.DelayTasksDue, "source", "s1"))
	require.InDelta(t, 60, value(t, s, metrics.DelayTasksOldestDueAge, "source", "default"), 30)
	require.InDelta(t, 600, value(t, s, metrics.DelayTasksOldestDueAge, "source", "s1"), 30)
	require.Equal(t, 0.0, value(t, s, metrics.DelayTasksStuckRunning, "source", "s1"))
	for _, src := range []string{"default", "s1", "down"} {
		require.Equal(t, 0.0, value(t, s, metrics.DelayClaimsTotal, "source", src))
		require.Equal(t, 0.0, value(t, s, metrics.DelayRecoveredTotal, "source", src))
	}
	require.Equal(t, 1.0, value(t, s, metrics.OrdersPaymentConflicts, "source", "default"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersPaymentConflicts, "source", "s1"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersRefundsOwed, "source", "s1"))
	require.InDelta(t, 6.5, value(t, s, metrics.OrdersRefundsOwedAmount, "source", "s1"), 1e-9)
	require.InDelta(t, 7200, value(t, s, metrics.OrdersRefundsOwedOldestAge, "source", "s1"), 60)
	require.InDelta(t, 3600, value(t, s, metrics.OrdersRefundsOwedOldestAge, "source", "default"), 60)
	for _, n := range []string{metrics.DelayTasks, metrics.DelayTasksDue, metrics.DelayTasksOldestDueAge, metrics.DelayTasksStuckRunning,
		metrics.OrdersPaymentConflicts, metrics.OrdersRefundsOwed, metrics.OrdersRefundsOwedAmount, metrics.OrdersRefundsOwedOldestAge} {
		_, ok := s.Value(n, "source", "down")
		require.False(t, ok, "no %s of a database never read", n)
	}

	// s1 is read again while down keeps failing.
	register(s1D, 1, time.Second)
	_, err := s1Refunds.MarkRefunded(ctx, "wx-2", "refund 1", "test")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := scrape(t, m)
		return value(t, s, metrics.DelayTasksDue, "source", "s1") == 4 && value(t, s, metrics.OrdersRefundsOwed, "source", "s1") == 1
	}, 5*time.Second, 5*time.Millisecond)
	s = scrape(t, m)
	require.Equal(t, 3.0, value(t, s, "go_sql_max_open_connections", "source", "s1", "db_name", "orders"))
	require.Positive(t, value(t, s, "go_sql_open_connections", "source", "s1"), "s1's samplers used its pool")
	require.Positive(t, value(t, s, "go_sql_open_connections", "source", "default"))
	require.Zero(t, value(t, s, "go_sql_max_open_connections", "source", "down"), "down's pool, unlimited")
	for _, kind := range []string{"delay", "refunds"} {
		require.Positive(t, value(t, s, metrics.SamplerErrorsTotal, "sampler", kind+":down"))
		require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", kind+":s1"))
		require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", kind))
	}
}
