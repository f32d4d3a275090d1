package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the dead-letter retry job (RetryDeadLetters).
// The close path's own dead-letter statements (upsert on failure, resolve on
// success, the sweep's probe) stay in store.go; the retry job reuses them
// through CloseOrder. The operator view's are in package deadletters.

// dueLetter is a waiting close dead letter whose retry time has come.
type dueLetter struct {
	ID          int64     `db:"id"`
	OrderNo     string    `db:"order_no"`
	Attempts    int       `db:"attempts"`
	NextRetryAt time.Time `db:"next_retry_at"`
}

// dueLettersSQL reads the next keyset page of one order table's waiting
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
var dueLettersSQL = `
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

// dueLetterParams are dueLettersSQL's: the order table, one shard of its
// letters, the run's clock, the cursor and the page size.
type dueLetterParams struct {
	Table      string    `db:"table"`
	ShardIndex int       `db:"shard_index"`
	ShardTotal int       `db:"shard_total"`
	Now        time.Time `db:"now"`
	AfterAt    time.Time `db:"after_at"`
	AfterID    int64     `db:"after_id"`
	Limit      int       `db:"limit"`
}

func (store) dueLetters(ctx context.Context, q sqlx.QueryerContext, p dueLetterParams) ([]dueLetter, error) {
	var rows []dueLetter
	if err := sqlexec.SelectNamed(ctx, q, &rows, dueLettersSQL, p); err != nil {
		return nil, fmt.Errorf("scan due dead letters of table %q after (%s, %d): %w", p.Table, p.AfterAt.Format(time.DateTime), p.AfterID, err)
	}
	return rows, nil
}

// claimLetterSQL takes one due letter for this run by pushing its
// next_retry_at past the replay's worst case.
//
// until is the claim's end. The WHERE repeats what the scan saw (still waiting, same attempts, still due), so of
// two runs that read the same letter only one changes the row; the other
// gets 0 rows and leaves it. A claim that outlives a crashed executor just
// expires: the letter is due again at until. One row or none.
const claimLetterSQL = `
UPDATE order_dead_letter SET next_retry_at = :until
WHERE id = :id AND status = 'waiting' AND attempts = :attempts AND next_retry_at <= :now`

func (store) claimLetter(ctx context.Context, e sqlx.ExecerContext, l dueLetter, now, until time.Time) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, claimLetterSQL, map[string]any{"until": until, "id": l.ID, "attempts": l.Attempts, "now": now})
	if err != nil {
		return false, fmt.Errorf("claim dead letter of %s: %w", l.OrderNo, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// settleLetterSQL moves a claimed letter from waiting to a final status with
// its reason (resolved: the order needs no close any more; parked: a person
// must look).
//
// The WHERE repeats status = 'waiting': a
// letter resolved or parked meanwhile is left as it is. One row or none.
const settleLetterSQL = `
UPDATE order_dead_letter SET status = :status, status_reason = :reason
WHERE id = :id AND status = 'waiting'`

func (store) settleLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, settleLetterSQL, map[string]any{"status": status, "reason": reason, "id": id})
	if err != nil {
		return false, fmt.Errorf("mark dead letter %d %s: %w", id, status, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// noteLetterSQL records why a letter got the status it already has (the
// close transaction resolved it, or the failure upsert parked it).
// The WHERE repeats the status it expects. One row or none.
const noteLetterSQL = `
UPDATE order_dead_letter SET status_reason = :reason WHERE id = :id AND status = :status`

func (store) noteLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) error {
	if _, err := sqlexec.ExecNamed(ctx, e, noteLetterSQL, map[string]any{"reason": reason, "id": id, "status": status}); err != nil {
		return fmt.Errorf("note dead letter %d: %w", id, err)
	}
	return nil
}
