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
)

// The delayed-task gauges and totals are exported per dispatcher, each
// labelled with the order database it serves: mysql.dsn's ("default") is
// read on the sampler "delay", another's on a sampler of its own, which
// keeps failing alone while its database does not answer.
func TestDelayGaugesPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, s1 := dbtest.New(t), dbtest.New(t)
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
	down := sqlx.MustOpen("mysql", "root@tcp(127.0.0.1:1)/down?parseTime=true&timeout=2s")
	t.Cleanup(func() { down.Close() })

	m := metrics.New(metrics.Config{DelaySampleInterval: time.Millisecond})
	m.WatchDispatcher("default", homeD)
	m.WatchDispatcher("s1", s1D)
	m.WatchDispatcher("down", dispatcherOn(down, "down"))
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
	for _, n := range []string{metrics.DelayTasks, metrics.DelayTasksDue, metrics.DelayTasksOldestDueAge, metrics.DelayTasksStuckRunning} {
		_, ok := s.Value(n, "source", "down")
		require.False(t, ok, "no %s of a database never read", n)
	}

	// s1 is read again while down keeps failing.
	register(s1D, 1, time.Second)
	require.Eventually(t, func() bool {
		return value(t, scrape(t, m), metrics.DelayTasksDue, "source", "s1") == 4
	}, 5*time.Second, 5*time.Millisecond)
	s = scrape(t, m)
	require.Positive(t, value(t, s, metrics.SamplerErrorsTotal, "sampler", "delay:down"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "delay:s1"))
	require.Equal(t, 0.0, value(t, s, metrics.SamplerErrorsTotal, "sampler", "delay"))
}
