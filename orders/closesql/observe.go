package closesql

// This file holds the statement behind the dead-letter gauge, which a
// metrics sampler reads every few seconds (orders' store_observe.go; the
// overdue gauge's statement is rendered: Statements.Overdue). A plain
// consistent read with a bounded cost.

// DeadLetterTallies counts the dead letters that are not resolved, by
// stage and status. No params. A range of idx_status_retry per status (the
// resolved ones, which pile up, are never read). No locks.
const DeadLetterTallies = `
SELECT stage, status, COUNT(*) AS n
FROM order_dead_letter FORCE INDEX (idx_status_retry)
WHERE status IN ('waiting', 'parked')
GROUP BY stage, status`
