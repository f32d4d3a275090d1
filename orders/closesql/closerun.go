package closesql

// This file holds the statements that write the close-run records
// (order_close_run): the insert every Run ends with and the retention
// purge (package inspect reads them; orders' store_closerun.go runs these).
// None of them touches another table or takes a lock beyond the rows it
// writes.

// InsertCloseRun records one finished run; finished_at is the database
// clock now. Named parameters are orders.RunRecord's db tags.
const InsertCloseRun = `
INSERT INTO order_close_run (started_at, finished_at, host, source, shard_index, shard_total, dry_run, scanned,
	closed, skipped_paid, skipped_locked, dead_lettered, lock_errors, trade_errors, max_lateness_ms, result, error, log_id,
	order_source, order_table)
VALUES (:started_at, NOW(3), :host, :source, :shard_index, :shard_total, :dry_run, :scanned,
	:closed, :skipped_paid, :skipped_locked, :dead_lettered, :lock_errors, :trade_errors, :max_lateness_ms, :result, :error, :log_id,
	:order_source, :order_table)`

// InsertInterruptedCloseRun records a run an earlier process never
// finished, unless a record of its log id started within a day of it
// exists (the run's own, or an earlier restart's); finished_at is the
// database clock now. Named parameters are orders.RunRecord's db tags.
//
// Reads a range of idx_log_id (one log id, shared next-key locks under
// REPEATABLE READ until the statement ends); inserts 0 or 1 row.
const InsertInterruptedCloseRun = `
INSERT INTO order_close_run (started_at, finished_at, host, source, shard_index, shard_total, dry_run, error, log_id,
	order_source, order_table)
SELECT :started_at, NOW(3), :host, :source, :shard_index, :shard_total, :dry_run, :error, :log_id,
	:order_source, :order_table FROM DUAL
WHERE NOT EXISTS (
  SELECT 1 FROM order_close_run FORCE INDEX (idx_log_id)
  WHERE log_id = :log_id AND started_at BETWEEN :started_at - INTERVAL 1 DAY AND :started_at + INTERVAL 1 DAY
)`

// ExpiredCloseRuns finds the oldest records past the retention.
//
// A range of idx_finished_at from its start; no locks. The ids are then deleted by primary key.
const ExpiredCloseRuns = `
SELECT id FROM order_close_run FORCE INDEX (idx_finished_at)
WHERE finished_at < NOW(3) - INTERVAL :retention_us MICROSECOND
ORDER BY finished_at
LIMIT :limit`

// DeleteCloseRuns deletes the listed records (literal id list) through
// the primary key.
const DeleteCloseRuns = `DELETE FROM order_close_run WHERE id IN (%s)`
