package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
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

// letterCursor is the keyset position of the retry scan: the last row read.
type letterCursor struct {
	NextRetryAt time.Time
	ID          int64
}

// dueLettersSQL reads the next keyset page of waiting close dead letters of
// one shard whose next_retry_at has come.
//
// Params: now (upper bound), cursor next_retry_at, cursor next_retry_at,
// cursor id (the first page passes year 1000 and id -1), shard total, shard
// index, limit. A plain consistent read over idx_status_retry (status,
// next_retry_at, id): no locks; the claim below decides who replays a
// letter. stage is checked on the row (letters of other stages belong to
// other jobs). Returns up to limit rows in key order.
const dueLettersSQL = `
SELECT id, order_no, attempts, next_retry_at
FROM order_dead_letter FORCE INDEX (idx_status_retry)
WHERE status = 'waiting'
  AND next_retry_at <= ?
  AND (next_retry_at > ? OR (next_retry_at = ? AND id > ?))
  AND stage = 'close'
  AND id % ? = ?
ORDER BY next_retry_at, id
LIMIT ?`

func (store) dueLetters(ctx context.Context, q sqlx.QueryerContext, cur letterCursor, now time.Time, shardIndex, shardTotal, limit int) ([]dueLetter, error) {
	var rows []dueLetter
	err := sqlx.SelectContext(ctx, q, &rows, dueLettersSQL,
		now, cur.NextRetryAt, cur.NextRetryAt, cur.ID, shardTotal, shardIndex, limit)
	if err != nil {
		return nil, fmt.Errorf("scan due dead letters after (%s, %d): %w", cur.NextRetryAt.Format(time.DateTime), cur.ID, err)
	}
	return rows, nil
}

// claimLetterSQL takes one due letter for this run by pushing its
// next_retry_at past the replay's worst case.
//
// Params: until (the claim's end), id, attempts as read, now. The WHERE
// repeats what the scan saw (still waiting, same attempts, still due), so of
// two runs that read the same letter only one changes the row; the other
// gets 0 rows and leaves it. A claim that outlives a crashed executor just
// expires: the letter is due again at until. One row or none.
const claimLetterSQL = `
UPDATE order_dead_letter SET next_retry_at = ?
WHERE id = ? AND status = 'waiting' AND attempts = ? AND next_retry_at <= ?`

func (store) claimLetter(ctx context.Context, e sqlx.ExecerContext, l dueLetter, now, until time.Time) (bool, error) {
	res, err := e.ExecContext(ctx, claimLetterSQL, until, l.ID, l.Attempts, now)
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
// Params: new status, reason, id. The WHERE repeats status = 'waiting': a
// letter resolved or parked meanwhile is left as it is. One row or none.
const settleLetterSQL = `
UPDATE order_dead_letter SET status = ?, status_reason = ?
WHERE id = ? AND status = 'waiting'`

func (store) settleLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) (bool, error) {
	res, err := e.ExecContext(ctx, settleLetterSQL, status, reason, id)
	if err != nil {
		return false, fmt.Errorf("mark dead letter %d %s: %w", id, status, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// noteLetterSQL records why a letter got the status it already has (the
// close transaction resolved it, or the failure upsert parked it).
//
// Params: reason, id, expected status. One row or none.
const noteLetterSQL = `
UPDATE order_dead_letter SET status_reason = ? WHERE id = ? AND status = ?`

func (store) noteLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) error {
	if _, err := e.ExecContext(ctx, noteLetterSQL, reason, id, status); err != nil {
		return fmt.Errorf("note dead letter %d: %w", id, err)
	}
	return nil
}
