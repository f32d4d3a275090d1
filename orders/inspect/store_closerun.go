package inspect

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the operator's reads of the close-run records
// (order_close_run; package orders writes them and purges the old ones).
// Neither touches another table or takes a lock.

const closeRunColumns = `id, started_at, finished_at, host, source, shard_index, shard_total, dry_run, scanned,
	closed, skipped_paid, skipped_locked, dead_lettered, lock_errors, trade_errors, max_lateness_ms, result, error, log_id,
	order_source, order_table`

// recentCloseRunsSQL reads a page of records newest first.
//
// A backwards range of the primary key before an id (exclusive); no locks.
const recentCloseRunsSQL = `SELECT ` + closeRunColumns + ` FROM order_close_run FORCE INDEX (PRIMARY)
WHERE id < :before_id ORDER BY id DESC LIMIT :limit`

func (store) recentCloseRuns(ctx context.Context, q sqlx.QueryerContext, beforeID int64, limit int) ([]CloseRun, error) {
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	runs := []CloseRun{}
	if err := sqlexec.SelectNamed(ctx, q, &runs, recentCloseRunsSQL, map[string]any{"before_id": beforeID, "limit": limit}); err != nil {
		return nil, fmt.Errorf("read close runs: %w", err)
	}
	return runs, nil
}

// summarizeCloseRunsSQL adds up the newest records of a window.
//
// A backwards range of idx_finished_at over the window, at most cap rows (one primary-key lookup each); no
// locks.
const summarizeCloseRunsSQL = `
SELECT COUNT(*) AS runs, COALESCE(SUM(t.error <> '' OR t.dead_lettered > 0), 0) AS failed,
       COALESCE(SUM(t.closed), 0) AS closed, COALESCE(SUM(t.dead_lettered), 0) AS dead_lettered,
       COALESCE(MAX(t.max_lateness_ms), 0) AS max_lateness_ms
FROM (
  SELECT error, dead_lettered, closed, max_lateness_ms
  FROM order_close_run FORCE INDEX (idx_finished_at)
  WHERE finished_at >= NOW(3) - INTERVAL :window_us MICROSECOND
  ORDER BY finished_at DESC
  LIMIT :cap
) t`

func (store) summarizeCloseRuns(ctx context.Context, q sqlx.QueryerContext, window time.Duration, limit int) (CloseRunSummary, error) {
	var r struct {
		Runs         int   `db:"runs"`
		Failed       int   `db:"failed"`
		Closed       int   `db:"closed"`
		DeadLettered int   `db:"dead_lettered"`
		MaxLateMs    int64 `db:"max_lateness_ms"`
	}
	if err := sqlexec.GetNamed(ctx, q, &r, summarizeCloseRunsSQL, map[string]any{"window_us": window.Microseconds(), "cap": limit}); err != nil {
		return CloseRunSummary{}, fmt.Errorf("add up close runs: %w", err)
	}
	return CloseRunSummary{Runs: r.Runs, Failed: r.Failed, Closed: r.Closed, DeadLettered: r.DeadLettered,
		MaxLateness: time.Duration(r.MaxLateMs) * time.Millisecond, Capped: r.Runs >= limit}, nil
}
