package deadletters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
const deadLetterColumns = `id, order_no, order_table, stage, status, status_reason, last_error, attempts, next_retry_at, created_at, updated_at`

// letterByIDSQL reads one letter by id. No locks; zero or one row.
const letterByIDSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter WHERE id = ?`

// letterSQL reads one order's letter of a stage through uk_order_stage.
// No locks; zero or one row.
const letterSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter WHERE order_no = :order_no AND stage = :stage`

// letterParams are the parameters of the statements about letters: one
// order's (order_no, stage), or a filter (status, stage, the error text,
// "" for any; since, until), a keyset position (after one key going up,
// before one going down) and a page size.
type letterParams struct {
	OrderNo  string `db:"order_no"`
	Status   string `db:"status"`
	Stage    string `db:"stage"`
	Error    string `db:"error"`
	Since    any    `db:"since"`
	Until    any    `db:"until"`
	AfterAt  any    `db:"after_at"`
	AfterID  int64  `db:"after_id"`
	BeforeAt any    `db:"before_at"`
	BeforeID int64  `db:"before_id"`
	Limit    int    `db:"limit"`
}

func (store) letter(ctx context.Context, q sqlx.QueryerContext, orderNo, stage string) (*Letter, error) {
	var dl Letter
	err := sqlexec.GetNamed(ctx, q, &dl, letterSQL, letterParams{OrderNo: orderNo, Stage: stage})
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
// Each filter is "" (before id: 0, the first page) for any. No locks. Walks the primary key
// backwards; with a status filter idx_status_retry may be used instead and
// the page sorted (resolved letters pile up, so filter by status to list the
// ones that matter: waiting and parked).
const listLettersSQL = `
SELECT ` + deadLetterColumns + ` FROM order_dead_letter
WHERE (:status = '' OR status = :status) AND (:stage = '' OR stage = :stage) AND (:before_id = 0 OR id < :before_id)
ORDER BY id DESC
LIMIT :limit`

// requeueLetterSQL sets a waiting or parked letter back to waiting, due now
// (the database clock, the one the retry scan and the close sweep compare
// next_retry_at with). attempts and last_error are kept for the record;
// status_reason, which explains a parked or resolved status, is cleared.
//
// uk_order_stage; one row or none (none: no such
// letter, it is resolved, or nothing changed).
const requeueLetterSQL = `
UPDATE order_dead_letter SET status = 'waiting', next_retry_at = NOW(3), status_reason = ''
WHERE order_no = :order_no AND stage = :stage AND status IN ('waiting', 'parked')`

func (store) requeueLetter(ctx context.Context, e sqlx.ExecerContext, orderNo, stage string) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, requeueLetterSQL, letterParams{OrderNo: orderNo, Stage: stage})
	if err != nil {
		return false, fmt.Errorf("requeue dead letter of %s (%s): %w", orderNo, stage, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// matchLettersSQL reads the next keyset page of letters a bulk requeue
// selects.
//
// since is the first page's cursor too; the error text is "" for any.
// Walks idx_status_updated (status, updated_at, id) from the
// cursor over one status, so only letters of that status since the given
// time are read (resolved ones, which pile up, never); stage and the error
// text are checked on those rows. `%` and `_` in the error text are LIKE
// wildcards. No locks. Returns up to limit ids in key order.
const matchLettersSQL = `
SELECT id, updated_at FROM order_dead_letter FORCE INDEX (idx_status_updated)
WHERE status = :status AND stage = :stage AND updated_at >= :since
  AND (updated_at > :after_at OR (updated_at = :after_at AND id > :after_id))
  AND (:error = '' OR last_error LIKE CONCAT('%', :error, '%'))
ORDER BY updated_at, id
LIMIT :limit`

// letterKey is the keyset position of a bulk requeue's read.
type letterKey struct {
	ID        int64     `db:"id"`
	UpdatedAt time.Time `db:"updated_at"`
}

func (store) matchLetters(ctx context.Context, q sqlx.QueryerContext, f RequeueFilter, after letterKey, limit int) ([]letterKey, error) {
	var rows []letterKey
	err := sqlexec.SelectNamed(ctx, q, &rows, matchLettersSQL, letterParams{Status: f.Status, Stage: f.Stage, Since: f.Since,
		AfterAt: after.UpdatedAt, AfterID: after.ID, Error: f.ErrorLike, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("find %s dead letters to requeue: %w", f.Status, err)
	}
	return rows, nil
}

// requeueLettersSQL sets the listed letters back to waiting, due now, as
// requeueLetterSQL does for one.
//
// The ids are a literal list. The WHERE repeats the selection, so a letter resolved or
// changed since it was read is left as it is. The primary key is named: with
// few letters in the status (the usual case) the optimizer would walk
// idx_status_retry instead. Rows affected: the letters requeued.
const requeueLettersSQL = `
UPDATE order_dead_letter FORCE INDEX (PRIMARY) SET status = 'waiting', next_retry_at = NOW(3), status_reason = ''
WHERE id IN (%s) AND status = :status AND stage = :stage AND updated_at >= :since
  AND (:error = '' OR last_error LIKE CONCAT('%%', :error, '%%'))`

func (store) requeueLetters(ctx context.Context, e sqlx.ExecerContext, f RequeueFilter, ids []int64) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(requeueLettersSQL, sqlexec.IntList(ids)),
		letterParams{Status: f.Status, Stage: f.Stage, Since: f.Since, Error: f.ErrorLike})
	if err != nil {
		return 0, fmt.Errorf("requeue %d dead letters: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// letterHit is the row filter of a letter list's search window: the stage
// and the error text ("" for any).
const letterHit = `(:stage = '' OR stage = :stage) AND (:error = '' OR last_error LIKE CONCAT('%', :error, '%'))`

// letterWindowByIDSQL is a letter list's search window without a status:
// newest id first from the cursor.
//
// A backwards range of the primary key from the cursor (exclusive), the filter evaluated on each row
// read; no locks. Returns up to window keys.
const letterWindowByIDSQL = `
SELECT id, updated_at AS at, ` + letterHit + ` AS hit
FROM order_dead_letter FORCE INDEX (PRIMARY)
WHERE id < :before_id
ORDER BY id DESC
LIMIT :limit`

// letterWindowByStatusSQL is a letter list's search window over one
// status: most recently changed first from the cursor, within the time
// range.
//
// A backwards range of
// idx_status_updated (status, updated_at, id), the filter evaluated on the
// row behind each entry; no locks. Returns up to window keys.
const letterWindowByStatusSQL = `
SELECT id, updated_at AS at, ` + letterHit + ` AS hit
FROM order_dead_letter FORCE INDEX (idx_status_updated)
WHERE status = :status AND updated_at >= :since AND updated_at < :until
  AND (updated_at < :before_at OR (updated_at = :before_at AND id < :before_id))
ORDER BY updated_at DESC, id DESC
LIMIT :limit`

func (store) letterWindow(ctx context.Context, q sqlx.QueryerContext, f Query, window int) ([]oplist.WindowKey, error) {
	p := letterParams{Stage: f.Stage, Error: f.ErrorLike, Limit: window}
	var keys []oplist.WindowKey
	var err error
	if f.Status == "" {
		p.BeforeID = f.After.BeforeID()
		err = sqlexec.SelectNamed(ctx, q, &keys, letterWindowByIDSQL, p)
	} else {
		since, until := f.Since, f.Until
		if since.IsZero() {
			since = sqlexec.Earliest
		}
		if until.IsZero() {
			until = sqlexec.Latest
		}
		p.Status, p.Since, p.Until = f.Status, since, until
		p.BeforeAt, p.BeforeID = f.After.Before(sqlexec.Latest)
		err = sqlexec.SelectNamed(ctx, q, &keys, letterWindowByStatusSQL, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return keys, nil
}

// lettersByIDSQL reads listed letters (literal id list) through the
// primary key. No locks.
const lettersByIDSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter FORCE INDEX (PRIMARY) WHERE id IN (%s)`

// lettersOfOrderSQL reads every letter of one order (all stages) through
// uk_order_stage, by order number. No locks; one row per stage.
const lettersOfOrderSQL = `SELECT ` + deadLetterColumns + ` FROM order_dead_letter FORCE INDEX (uk_order_stage)
WHERE order_no = ? ORDER BY stage`

// letterList reads order_dead_letter for Ops: one letter by id, the list
// by id, the rows of a page (letterWindow reads its window) and one
// order's letters, on the statements above.
var letterList = oplist.Table[Letter]{Noun: "dead letters", One: "dead letter", GetSQL: letterByIDSQL,
	ListSQL: listLettersSQL, ByIDSQL: lettersByIDSQL, OfOrderSQL: lettersOfOrderSQL,
	ID: func(l Letter) int64 { return l.ID }}

// countLettersSQL counts the letters of one status, up to a cap.
//
// A range of idx_status_updated over the status, at most cap entries (resolved letters pile up: the count stops there); no
// locks.
const countLettersSQL = `
SELECT COUNT(*) FROM (
  SELECT 1 FROM order_dead_letter FORCE INDEX (idx_status_updated) WHERE status = :status LIMIT :limit
) t`

func (store) count(ctx context.Context, q sqlx.QueryerContext, status string, limit int) (int, error) {
	var n int
	if err := sqlexec.GetNamed(ctx, q, &n, countLettersSQL, letterParams{Status: status, Limit: limit}); err != nil {
		return 0, fmt.Errorf("count %s dead letters: %w", status, err)
	}
	return n, nil
}
