package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL that writes the close-run records
// (order_close_run): the insert every Run ends with and the retention
// purge (package inspect reads them). None of them touches another table
// or takes a lock beyond the rows it writes.

// insertCloseRunSQL records one finished run; finished_at is the database
// clock now. Named parameters are runRecord's db tags.
const insertCloseRunSQL = `
INSERT INTO order_close_run (started_at, finished_at, host, source, shard_index, shard_total, dry_run, scanned,
	closed, skipped_paid, skipped_locked, dead_lettered, lock_errors, trade_errors, max_lateness_ms, result, error, log_id,
	order_source, order_table)
VALUES (:started_at, NOW(3), :host, :source, :shard_index, :shard_total, :dry_run, :scanned,
	:closed, :skipped_paid, :skipped_locked, :dead_lettered, :lock_errors, :trade_errors, :max_lateness_ms, :result, :error, :log_id,
	:order_source, :order_table)`

func (store) insertCloseRun(ctx context.Context, e sqlx.ExtContext, r runRecord) error {
	if _, err := sqlx.NamedExecContext(ctx, e, insertCloseRunSQL, r); err != nil {
		return fmt.Errorf("record close run: %w", err)
	}
	return nil
}

// insertInterruptedCloseRunSQL records a run an earlier process never
// finished, unless a record of its log id started within a day of it
// exists (the run's own, or an earlier restart's); finished_at is the
// database clock now. Named parameters are runRecord's db tags.
//
// Reads a range of idx_log_id (one log id, shared next-key locks under
// REPEATABLE READ until the statement ends); inserts 0 or 1 row.
const insertInterruptedCloseRunSQL = `
INSERT INTO order_close_run (started_at, finished_at, host, source, shard_index, shard_total, dry_run, error, log_id,
	order_source, order_table)
SELECT :started_at, NOW(3), :host, :source, :shard_index, :shard_total, :dry_run, :error, :log_id,
	:order_source, :order_table FROM DUAL
WHERE NOT EXISTS (
  SELECT 1 FROM order_close_run FORCE INDEX (idx_log_id)
  WHERE log_id = :log_id AND started_at BETWEEN :started_at - INTERVAL 1 DAY AND :started_at + INTERVAL 1 DAY
)`

func (store) insertInterruptedCloseRun(ctx context.Context, e sqlx.ExtContext, r runRecord) (bool, error) {
	res, err := sqlx.NamedExecContext(ctx, e, insertInterruptedCloseRunSQL, r)
	if err != nil {
		return false, fmt.Errorf("record interrupted close run of log %d: %w", r.LogID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record interrupted close run of log %d: %w", r.LogID, err)
	}
	return n > 0, nil
}

// expiredCloseRunsSQL finds the oldest records past the retention.
//
// A range of idx_finished_at from its start; no locks. The ids are then deleted by primary key.
const expiredCloseRunsSQL = `
SELECT id FROM order_close_run FORCE INDEX (idx_finished_at)
WHERE finished_at < NOW(3) - INTERVAL :retention_us MICROSECOND
ORDER BY finished_at
LIMIT :limit`

// deleteCloseRunsSQL deletes the listed records (literal id list) through
// the primary key.
const deleteCloseRunsSQL = `DELETE FROM order_close_run WHERE id IN (%s)`

func (store) purgeCloseRuns(ctx context.Context, e sqlx.ExtContext, retention time.Duration, limit int) error {
	var ids []int64
	if err := sqlexec.SelectNamed(ctx, e, &ids, expiredCloseRunsSQL, map[string]any{"retention_us": retention.Microseconds(), "limit": limit}); err != nil {
		return fmt.Errorf("find expired close runs: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := e.ExecContext(ctx, fmt.Sprintf(deleteCloseRunsSQL, sqlexec.IntList(ids))); err != nil {
		return fmt.Errorf("delete %d expired close runs: %w", len(ids), err)
	}
	return nil
}
