package closesql

import "github.com/orderjob/executor/internal/shard"

// This file holds the statements of the dead-letter retry job (orders'
// RetryDeadLetters, run by its store_deadletter.go). The close path's own
// dead-letter statements (upsert on failure, resolve on success, the
// sweep's probe) are in close.go; the retry job reuses them through
// CloseOrder. The operator view's are in package deadletters.

// DueLetters reads the next keyset page of one order table's waiting
// close dead letters of one shard whose next_retry_at has come.
//
// The table is the letter's order_table (empty for letters written before
// migration 0138). The cursor is the last row of the previous page (the
// first page passes year 1000 and id -1). A plain consistent read over
// idx_table_status_retry (order_table, status, next_retry_at, id): one
// range per table, so a database of many tables reads each table's
// letters once; no locks, the claim below decides who replays a letter.
// stage is checked on the row (letters of other stages belong to other
// jobs). Returns up to limit rows in key order.
var DueLetters = `
SELECT id, order_no, attempts, next_retry_at
FROM order_dead_letter FORCE INDEX (idx_table_status_retry)
WHERE order_table = :table
  AND status = 'waiting'
  AND next_retry_at <= :now
  AND (next_retry_at > :after_at OR (next_retry_at = :after_at AND id > :after_id))
  AND stage = 'close'
  AND ` + shard.Match("id") + `
ORDER BY next_retry_at, id
LIMIT :limit`

// ClaimLetter takes one due letter for this run by pushing its
// next_retry_at past the replay's worst case.
//
// until is the claim's end on the run's clock (a session wall clock, as
// next_retry_at is); ttl_us is the claim's length. The claim ends at the
// later of until and the wall-clock reading of the instant ttl_us from now
// (FROM_UNIXTIME of the server's clock, which knows the zone's changes):
// where the zone springs forward within the claim, until alone would have
// passed an hour early, and another run would replay the letter while this
// one still does; where it falls back, until is the later one (the claim
// then lasts an hour longer, which only delays a crashed run's letter).
// The WHERE repeats what the scan saw (still waiting, same attempts, still due), so of
// two runs that read the same letter only one changes the row; the other
// gets 0 rows and leaves it. A claim that outlives a crashed executor just
// expires: the letter is due again at its end. One row or none.
const ClaimLetter = `
UPDATE order_dead_letter SET next_retry_at = GREATEST(:until, FROM_UNIXTIME(@@timestamp + :ttl_us / 1000000))
WHERE id = :id AND status = 'waiting' AND attempts = :attempts AND next_retry_at <= :now`

// SettleLetter moves a claimed letter from waiting to a final status with
// its reason (resolved: the order needs no close any more; parked: a person
// must look).
//
// The WHERE repeats status = 'waiting': a
// letter resolved or parked meanwhile is left as it is. One row or none.
const SettleLetter = `
UPDATE order_dead_letter SET status = :status, status_reason = :reason
WHERE id = :id AND status = 'waiting'`

// NoteLetter records why a letter got the status it already has (the
// close transaction resolved it, or the failure upsert parked it).
// The WHERE repeats the status it expects. One row or none.
const NoteLetter = `
UPDATE order_dead_letter SET status_reason = :reason WHERE id = :id AND status = :status`
