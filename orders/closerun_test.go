package orders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
)

// Every run leaves its record, with the summary line, the counts and how
// late it was, and a run deletes records past the retention (the view's
// reads are package inspect's tests).
func TestCloseRunRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Host: "host-1"}))
	b.Seed(t, orderdemo.Spec{Orders: 40, DueFraction: 0.5, PaidFraction: 0.25, NotDueFraction: 0.25})
	_, err := b.DB.Exec(`UPDATE order_info SET create_time = NOW() - INTERVAL 3 HOUR WHERE status = 0 AND id % 7 = 0
		AND create_time + INTERVAL timeout_minutes MINUTE <= NOW()`)
	require.NoError(t, err)
	// An expired record, and one within the retention.
	_, err = b.DB.Exec(`INSERT INTO order_close_run (started_at, finished_at, result) VALUES
		(NOW(3) - INTERVAL 9 DAY, NOW(3) - INTERVAL 9 DAY, 'old'), (NOW(3) - INTERVAL 2 HOUR, NOW(3) - INTERVAL 2 HOUR, 'kept')`)
	require.NoError(t, err)

	due := b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= NOW()`)
	require.Positive(t, due)
	st := b.run(t, orders.RunOptions{Source: "test run"})
	require.Equal(t, due, st.Closed)
	require.GreaterOrEqual(t, st.MaxLateness, 2*time.Hour, "the orders aged by 3 hours were 2.5 hours late")
	dry := b.run(t, orders.RunOptions{DryRun: true, ShardIndex: 1, ShardTotal: 2})
	require.Zero(t, dry.Closed)

	runs, err := inspect.NewCloseRuns(b.DB.DB).Recent(b.Ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, runs, 3, "the expired record is gone")
	last, first := runs[0], runs[1]
	require.True(t, last.DryRun)
	require.Equal(t, 1, last.ShardIndex)
	require.Equal(t, 2, last.ShardTotal)
	require.Equal(t, "test run", first.Source)
	require.Equal(t, "host-1", first.Host)
	require.Equal(t, due, first.Scanned)
	require.Equal(t, due, first.Closed)
	require.Equal(t, st.String(), first.Result)
	require.Empty(t, first.Error)
	require.False(t, first.Failed())
	require.Equal(t, st.MaxLateness.Milliseconds(), first.MaxLatenessMs)
	require.False(t, first.FinishedAt.Before(first.StartedAt))
	require.Equal(t, "kept", runs[2].Result)
	require.Equal(t, st.MaxLateness.Truncate(time.Millisecond), first.MaxLateness())
}

// A run stopped by an error is recorded with it, and counts as failed.
func TestCloseRunRecordsError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Seed(t, orderdemo.Spec{Orders: 10, DueFraction: 1})
	_, err := b.DB.Exec(`RENAME TABLE order_close_log TO order_close_log_gone`)
	require.NoError(t, err)
	_, err = b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.Error(t, err)
	runs, err := inspect.NewCloseRuns(b.DB.DB).Recent(b.Ctx, 0, 1)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Contains(t, runs[0].Error, "order_close_log")
	require.True(t, runs[0].Failed())
	require.Zero(t, runs[0].Closed)
}

// A close run an earlier process never finished gets its record at the
// restart, failed with the executor's reason, once; a run that wrote its
// own record before the process ended keeps it.
func TestCloseRunInterruptedRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Host: "host-1"}))
	b.Seed(t, orderdemo.Spec{Orders: 10, DueFraction: 0.5, PaidFraction: 0.25, NotDueFraction: 0.25})
	view := inspect.NewCloseRuns(b.DB.DB)
	const reason = "executor restarted during the run: it started at ..."
	finished := b.run(t, orders.RunOptions{Source: "xxl-job log 501", LogID: 501})
	started := b.DB.Now(t).Add(-2 * time.Second)

	for _, tc := range []struct {
		name    string
		opt     orders.RunOptions
		started time.Time
		wantErr string
	}{
		{name: "no log id", opt: orders.RunOptions{Source: "executor run"}, started: started, wantErr: "log id 0 is not positive"},
		{name: "the run wrote its own record", opt: orders.RunOptions{LogID: 501}, started: started},
		{name: "interrupted", opt: orders.RunOptions{Source: "xxl-job log 502", LogID: 502, ShardIndex: 1, ShardTotal: 2, DryRun: true}, started: started},
		{name: "interrupted, recorded again by a later restart", opt: orders.RunOptions{LogID: 502}, started: started},
		{name: "the same log id two days apart (a reset admin)", opt: orders.RunOptions{LogID: 501}, started: started.Add(-48 * time.Hour)},
	} {
		err := b.Closer.RecordInterrupted(b.Ctx, tc.opt, tc.started, reason)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
	}

	runs, err := view.Recent(b.Ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, runs, 3, "the run's own record, the interrupted one once, the other 501")
	other, interrupted, own := runs[0], runs[1], runs[2]
	require.Equal(t, int64(501), own.LogID)
	require.Equal(t, finished.String(), own.Result)
	require.Empty(t, own.Error)

	require.Equal(t, int64(502), interrupted.LogID)
	require.Equal(t, reason, interrupted.Error)
	require.True(t, interrupted.Failed())
	require.Equal(t, "host-1", interrupted.Host)
	require.Equal(t, "xxl-job log 502", interrupted.Source)
	require.Equal(t, 1, interrupted.ShardIndex)
	require.Equal(t, 2, interrupted.ShardTotal)
	require.True(t, interrupted.DryRun)
	require.WithinDuration(t, started, interrupted.StartedAt, time.Millisecond)
	require.False(t, interrupted.FinishedAt.Before(interrupted.StartedAt))

	require.Equal(t, int64(501), other.LogID)
	require.Equal(t, reason, other.Error)

	sum, err := view.Summary(b.Ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Runs)
	require.Equal(t, 2, sum.Failed)
}
