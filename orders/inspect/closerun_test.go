package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/oplist"
)

// The view reads the records newest first, a page before an id, says which
// runs failed, and adds up the runs that finished within a window.
func TestCloseRunsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.ExecContext(ctx, `INSERT INTO order_close_run (started_at, finished_at, closed, dead_lettered, max_lateness_ms, result, error) VALUES
		(NOW(3) - INTERVAL 2 HOUR, NOW(3) - INTERVAL 2 HOUR, 4, 0, 9000, 'old', ''),
		(NOW(3) - INTERVAL 30 MINUTE, NOW(3) - INTERVAL 30 MINUTE, 0, 0, 0, '', 'boom'),
		(NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 5, 2, 1500, 'new', '')`)
	require.NoError(t, err)
	view := inspect.NewCloseRuns(db.DB)

	runs, err := view.Recent(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	last, failed, old := runs[0], runs[1], runs[2]
	require.Equal(t, "new", last.Result)
	require.True(t, last.Failed(), "dead-lettered orders fail a run")
	require.Equal(t, 1500*time.Millisecond, last.MaxLateness())
	require.True(t, failed.Failed())
	require.Equal(t, "boom", failed.Error)
	require.False(t, old.Failed())
	require.Greater(t, last.ID, failed.ID)

	older, err := view.Recent(ctx, failed.ID, 10)
	require.NoError(t, err)
	require.Equal(t, []inspect.CloseRun{old}, older)
	newest, err := view.Recent(ctx, 0, 1)
	require.NoError(t, err)
	require.Equal(t, []inspect.CloseRun{last}, newest)

	sum, err := view.Summary(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, inspect.CloseRunSummary{Window: time.Hour, Runs: 2, Failed: 2, Closed: 5, DeadLettered: 2,
		MaxLateness: 1500 * time.Millisecond}, sum)

	for _, tc := range []struct {
		before int64
		limit  int
		field  string
	}{{0, 0, "limit"}, {0, oplist.MaxListLimit + 1, "limit"}, {-1, 10, "before"}} {
		_, err := view.Recent(ctx, tc.before, tc.limit)
		var inv *oplist.InvalidInputError
		require.ErrorAs(t, err, &inv)
		require.Equal(t, tc.field, inv.Field)
	}
}

// Summary adds up at most SummaryCap runs, the newest, and says so.
func TestCloseRunSummaryCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.ExecContext(ctx, `INSERT INTO order_close_run (started_at, finished_at, closed, result)
		SELECT NOW(3) - INTERVAL seq * 100000 MICROSECOND, NOW(3) - INTERVAL seq * 100000 MICROSECOND, 1, 'r' FROM seq_1_to_20001`)
	require.NoError(t, err)
	sum, err := inspect.NewCloseRuns(db.DB).Summary(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, inspect.SummaryCap, sum.Runs)
	require.Equal(t, inspect.SummaryCap, sum.Closed)
	require.True(t, sum.Capped)
}
