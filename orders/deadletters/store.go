package deadletters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the SQL of the operator view (Ops). The close path's own
// dead-letter statements (upsert on failure, resolve on success, the
// sweep's probe) and the retry job's (due letters, claim, settle) are in
// package orders.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx.
type store struct{}

// deadLetterColumns are the columns of a Letter.
const deadLetterColumns = `id, order_no, stage, status, status_reason, last_error, attempts, next_retry_at, created_at, updated_at`

// letterByIDSQL reads one letter by id. No locks; zero or one row.
const letterByIDSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter WHERE id = ?`

func (store) letterByID(ctx context.Context, q sqlx.QueryerContext, id int64) (*Letter, error) {
	var dl Letter
	err := sqlx.GetContext(ctx, q, &dl, letterByIDSQL, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %d: %w", id, err)
	}
	return &dl, nil
}

// letterSQL reads one order's letter of a stage through uk_order_stage.
// Params: order_no, stage. No locks; zero or one row.
const letterSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter WHERE order_no = ? AND stage = ?`

func (store) letter(ctx context.Context, q sqlx.QueryerContext, orderNo, stage string) (*Letter, error) {
	var dl Letter
	err := sqlx.GetContext(ctx, q, &dl, letterSQL, orderNo, stage)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter of %s (%s): %w", orderNo, stage, err)
	}
	return &dl, nil
}

// listLettersSQL lists letters newest first, one page.
//
// Params: status ("" for any), status, stage ("" for any), stage, before id
// (0 for the first page), before id, limit. No locks. Walks the primary key
// backwards; with a status filter idx_status_retry may be used instead and
// the page sorted (resolved letters pile up, so filter by status to list the
// ones that matter: waiting and parked).
const listLettersSQL = `
SELECT ` + deadLetterColumns + ` FROM order_dead_letter
WHERE (? = '' OR status = ?) AND (? = '' OR stage = ?) AND (? = 0 OR id < ?)
ORDER BY id DESC
LIMIT ?`

func (store) listLetters(ctx context.Context, q sqlx.QueryerContext, f Filter) ([]Letter, error) {
	rows := []Letter{}
	err := sqlx.SelectContext(ctx, q, &rows, listLettersSQL,
		f.Status, f.Status, f.Stage, f.Stage, f.BeforeID, f.BeforeID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return rows, nil
}

// requeueLetterSQL sets a waiting or parked letter back to waiting, due now
// (the database clock, the one the retry scan and the close sweep compare
// next_retry_at with). attempts and last_error are kept for the record;
// status_reason, which explains a parked or resolved status, is cleared.
//
// Params: order_no, stage. uk_order_stage; one row or none (none: no such
// letter, it is resolved, or nothing changed).
const requeueLetterSQL = `
UPDATE order_dead_letter SET status = 'waiting', next_retry_at = NOW(3), status_reason = ''
WHERE order_no = ? AND stage = ? AND status IN ('waiting', 'parked')`

func (store) requeueLetter(ctx context.Context, e sqlx.ExecerContext, orderNo, stage string) (bool, error) {
	res, err := e.ExecContext(ctx, requeueLetterSQL, orderNo, stage)
	if err != nil {
		return false, fmt.Errorf("requeue dead letter of %s (%s): %w", orderNo, stage, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// matchLettersSQL reads the next keyset page of letters a bulk requeue
// selects.
//
// Params: status, stage, since (the first page's cursor, too), cursor
// updated_at, cursor updated_at, cursor id, error text ("" for any), error
// text, limit. Walks idx_status_updated (status, updated_at, id) from the
// cursor over one status, so only letters of that status since the given
// time are read (resolved ones, which pile up, never); stage and the error
// text are checked on those rows. `%` and `_` in the error text are LIKE
// wildcards. No locks. Returns up to limit ids in key order.
const matchLettersSQL = `
SELECT id, updated_at FROM order_dead_letter FORCE INDEX (idx_status_updated)
WHERE status = ? AND stage = ? AND updated_at >= ?
  AND (updated_at > ? OR (updated_at = ? AND id > ?))
  AND (? = '' OR last_error LIKE CONCAT('%', ?, '%'))
ORDER BY updated_at, id
LIMIT ?`

// letterKey is the keyset position of a bulk requeue's read.
type letterKey struct {
	ID        int64     `db:"id"`
	UpdatedAt time.Time `db:"updated_at"`
}

func (store) matchLetters(ctx context.Context, q sqlx.QueryerContext, f RequeueFilter, after letterKey, limit int) ([]letterKey, error) {
	var rows []letterKey
	err := sqlx.SelectContext(ctx, q, &rows, matchLettersSQL, f.Status, f.Stage, f.Since,
		after.UpdatedAt, after.UpdatedAt, after.ID, f.ErrorLike, f.ErrorLike, limit)
	if err != nil {
		return nil, fmt.Errorf("find %s dead letters to requeue: %w", f.Status, err)
	}
	return rows, nil
}

// requeueLettersSQL sets the listed letters back to waiting, due now, as
// requeueLetterSQL does for one.
//
// Params: status, stage, since, error text, error text, then the id list
// (literal). The WHERE repeats the selection, so a letter resolved or
// changed since it was read is left as it is. The primary key is named: with
// few letters in the status (the usual case) the optimizer would walk
// idx_status_retry instead. Rows affected: the letters requeued.
const requeueLettersSQL = `
UPDATE order_dead_letter FORCE INDEX (PRIMARY) SET status = 'waiting', next_retry_at = NOW(3), status_reason = ''
WHERE id IN (%s) AND status = ? AND stage = ? AND updated_at >= ?
  AND (? = '' OR last_error LIKE CONCAT('%%', ?, '%%'))`

func (store) requeueLetters(ctx context.Context, e sqlx.ExecerContext, f RequeueFilter, ids []int64) (int64, error) {
	res, err := e.ExecContext(ctx, fmt.Sprintf(requeueLettersSQL, sqlexec.IntList(ids)),
		f.Status, f.Stage, f.Since, f.ErrorLike, f.ErrorLike)
	if err != nil {
		return 0, fmt.Errorf("requeue %d dead letters: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// letterHit is the row filter of a letter list's search window: the stage
// and the error text ("" for any). Params: stage, stage, text, text.
const letterHit = `(? = '' OR stage = ?) AND (? = '' OR last_error LIKE CONCAT('%', ?, '%'))`

// letterWindowByIDSQL is a letter list's search window without a status:
// newest id first from the cursor.
//
// Params: the row filter's four, cursor id (exclusive), window. A
// backwards range of the primary key, the filter evaluated on each row
// read; no locks. Returns up to window keys.
const letterWindowByIDSQL = `
SELECT id, updated_at AS at, ` + letterHit + ` AS hit
FROM order_dead_letter FORCE INDEX (PRIMARY)
WHERE id < ?
ORDER BY id DESC
LIMIT ?`

// letterWindowByStatusSQL is a letter list's search window over one
// status: most recently changed first from the cursor, within the time
// range.
//
// Params: the row filter's four, status, since, until, cursor updated_at,
// cursor updated_at, cursor id, window. A backwards range of
// idx_status_updated (status, updated_at, id), the filter evaluated on the
// row behind each entry; no locks. Returns up to window keys.
const letterWindowByStatusSQL = `
SELECT id, updated_at AS at, ` + letterHit + ` AS hit
FROM order_dead_letter FORCE INDEX (idx_status_updated)
WHERE status = ? AND updated_at >= ? AND updated_at < ?
  AND (updated_at < ? OR (updated_at = ? AND id < ?))
ORDER BY updated_at DESC, id DESC
LIMIT ?`

func (store) letterWindow(ctx context.Context, q sqlx.QueryerContext, f Query, window int) ([]oplist.WindowKey, error) {
	hit := []any{f.Stage, f.Stage, f.ErrorLike, f.ErrorLike}
	var keys []oplist.WindowKey
	var err error
	if f.Status == "" {
		before := f.After.ID
		if before == 0 {
			before = math.MaxInt64
		}
		err = sqlx.SelectContext(ctx, q, &keys, letterWindowByIDSQL, append(hit, before, window)...)
	} else {
		since, until := f.Since, f.Until
		if since.IsZero() {
			since = sqlexec.Earliest
		}
		if until.IsZero() {
			until = sqlexec.Latest
		}
		cur := f.After
		if cur.IsZero() {
			cur = oplist.Cursor{At: sqlexec.Latest, ID: math.MaxInt64}
		}
		err = sqlx.SelectContext(ctx, q, &keys, letterWindowByStatusSQL,
			append(hit, f.Status, since, until, cur.At, cur.At, cur.ID, window)...)
	}
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return keys, nil
}

// lettersByIDSQL reads listed letters (literal id list) through the
// primary key. No locks.
const lettersByIDSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter FORCE INDEX (PRIMARY) WHERE id IN (%s)`

func (store) lettersByID(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]Letter, error) {
	rows := []Letter{}
	if len(ids) == 0 {
		return rows, nil
	}
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(lettersByIDSQL, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("read %d dead letters: %w", len(ids), err)
	}
	return rows, nil
}

// lettersOfOrderSQL reads every letter of one order (all stages) through
// uk_order_stage. Params: order_no. No locks; one row per stage.
const lettersOfOrderSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter FORCE INDEX (uk_order_stage)
WHERE order_no = ? ORDER BY stage`

func (store) ofOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]Letter, error) {
	rows := []Letter{}
	if err := sqlx.SelectContext(ctx, q, &rows, lettersOfOrderSQL, orderNo); err != nil {
		return nil, fmt.Errorf("read dead letters of %s: %w", orderNo, err)
	}
	return rows, nil
}

// countLettersSQL counts the letters of one status, up to a cap.
//
// Params: status, cap. A range of idx_status_updated over the status, at
// most cap entries (resolved letters pile up: the count stops there); no
// locks.
const countLettersSQL = `
SELECT COUNT(*) FROM (
  SELECT 1 FROM order_dead_letter FORCE INDEX (idx_status_updated) WHERE status = ? LIMIT ?
) t`

func (store) count(ctx context.Context, q sqlx.QueryerContext, status string, limit int) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, countLettersSQL, status, limit); err != nil {
		return 0, fmt.Errorf("count %s dead letters: %w", status, err)
	}
	return n, nil
}
