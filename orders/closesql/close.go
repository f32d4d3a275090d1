package closesql

// This file holds the close path's statements on the executor's own tables
// (close log, dead letters) that orders' store.go runs: the sweep's letter
// reads, the close transaction's log and resolve, the failure's upsert.

// OpenLetters reads the open (waiting or parked) close dead letters, up
// to a limit: when there are few (the usual case: none), the sweep learns
// from this one short read which orders of a page have a letter, instead
// of probing every order of every page (LetterStates).
//
// It walks idx_status_retry over the two open statuses only (resolved
// letters, which pile up, are never read); stage is checked on the row. No
// locks. At most the given limit of rows.
const OpenLetters = `
SELECT order_no, status, next_retry_at FROM order_dead_letter FORCE INDEX (idx_status_retry)
WHERE status IN ('parked', 'waiting') AND stage = 'close'
LIMIT ?`

// LetterStates reads the open close dead letters of the orders of a scan
// page, when there are too many open letters to read them all.
//
// The order numbers are bound (sqlx.In). Probes uk_order_stage once per
// order of the page (forced: with a subquery in the scan instead, MariaDB
// materialises the whole dead-letter table per page, and resolved letters
// pile up there). No locks. One row per order with an open letter.
const LetterStates = `
SELECT order_no, status, next_retry_at FROM order_dead_letter FORCE INDEX (uk_order_stage)
WHERE order_no IN (?) AND stage = 'close' AND status IN ('parked', 'waiting')`

// InsertCloseLog records the closes, one row per order. Params per row
// (orders' closeLogsInsert appends them): order_no, closed_at, reason. uk_order_no makes a second close of an order
// fail with a duplicate-key error (the whole transaction then rolls back).
const InsertCloseLog = `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES `

// ResolveDeadLetters marks the waiting close dead letters of orders that
// have now been closed as resolved, inside the close transaction. It runs
// only for the orders known to have one (the sweep's letter read,
// CloseOrder's and CloseOrders' first look); a letter written after that
// look, for an order closed anyway, is resolved by the retry job, which
// finds the order closed.
// The order numbers are bound (sqlx.In). One uk_order_stage probe per
// order (forced: otherwise the optimizer may walk every waiting letter of
// idx_status_retry, which grows with an outage); under READ COMMITTED it
// locks only the rows it changes.
const ResolveDeadLetters = `
UPDATE order_dead_letter FORCE INDEX (uk_order_stage) SET status = 'resolved'
WHERE stage = 'close' AND status = 'waiting' AND order_no IN (?)`

// UpsertDeadLetter records a failed close of one order, in its own
// autocommit statement after the order's transaction rolled back (run
// again when rolled back as a deadlock's victim: orders' rerunDB).
//
// Locks: on an existing letter, an exclusive next-key lock on its
// uk_order_stage entry and its row, then the moves of its entries in the
// other indexes; on a new one, insert intention in uk_order_stage's gap.
//
// A first failure inserts the row with the first status ('waiting', or
// 'parked' when park-after is 1) and the first delay; an existing row (see
// orders' deadLetterParams) counts another attempt. The retry delay is orders' DeadLetterBackoff.schedule().Step of
// the new attempt count, base * 2^(attempts-1) up to the maximum, computed
// here because only the statement knows the row's attempts
// (TestDeadLetterScheduleMatchesBackoff holds the two together). A row that is parked stays parked; any other
// (waiting or resolved) goes back to waiting, or to parked once attempts
// reach park-after. Assignments run left to right, so status and
// next_retry_at see attempts before it is incremented. order_table is the
// Closer's order table, also on an existing row: a letter written before
// the column (migration 0138, empty) learns its table at its next failure.
// One row per (order_no, stage) via uk_order_stage.
const UpsertDeadLetter = `
INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at, order_table)
VALUES (:order_no, 'close', :first_status, :last_error, 1, :now + INTERVAL :first_delay_us MICROSECOND, :order_table)
ON DUPLICATE KEY UPDATE
  status = IF(status = 'parked' OR (:park_after > 0 AND attempts + 1 >= :park_after), 'parked', 'waiting'),
  last_error = :last_error,
  order_table = :order_table,
  next_retry_at = :now + INTERVAL FLOOR(LEAST(:base_us * POW(2, LEAST(attempts, 40)), :max_us)) MICROSECOND,
  attempts = attempts + 1`

// DeadLetterStatus reads the state of one order's close dead letter,
// by order number. No locks; zero or one row.
const DeadLetterStatus = `
SELECT status FROM order_dead_letter WHERE order_no = ? AND stage = 'close'`
