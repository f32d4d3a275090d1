package refunds

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the SQL of the refunds view (Ops, OfOrder). None of it
// is on a hot path: operators and a metrics sampler read payment_conflict,
// which holds one row per payment that could not be taken. The console's
// page reads search windows of keys in keyset order, then the rows of a
// page by primary key. No locks.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx.
type store struct{}

const conflictColumns = `id, payment_id, order_no, pay_amount, reason, channel, refund_status, refunded_at,
	refund_note, refunded_by, paid_at, created_at`

// listConflictsSQL lists conflicts newest first, one page.
// The filters are "" (status, order_no) or 0 (before id: the first page)
// for any. No locks.
const listConflictsSQL = `
SELECT ` + conflictColumns + ` FROM payment_conflict
WHERE (:status = '' OR refund_status = :status) AND (:order_no = '' OR order_no = :order_no)
  AND (:before_id = 0 OR id < :before_id)
ORDER BY id DESC
LIMIT :limit`

// conflictSQL reads the conflict of one payment id through uk_payment_id.
const conflictSQL = `SELECT ` + conflictColumns + ` FROM payment_conflict WHERE payment_id = ?`

// markRefundedSQL records a refund, through uk_payment_id; one row, or
// none when it was recorded before.
const markRefundedSQL = `
UPDATE payment_conflict SET refund_status = 'refunded', refunded_at = NOW(3), refund_note = :note, refunded_by = :by
WHERE payment_id = :payment_id AND refund_status = 'owed'`

func (store) markRefunded(ctx context.Context, e sqlx.ExecerContext, paymentID, note, by string) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, markRefundedSQL, map[string]any{"note": note, "by": by, "payment_id": paymentID})
	if err != nil {
		return false, fmt.Errorf("record refund of payment %s: %w", paymentID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// refundsOwedSQL sums up the owed refunds over idx_refund_status_created
// (the owed rows only: refunded ones pile up); conflictsTotalSQL counts
// every conflict over the same (narrow) index. No params, no locks.
const (
	refundsOwedSQL = `
SELECT COUNT(*) AS n, COALESCE(SUM(pay_amount), 0) AS amount, MIN(created_at) AS oldest, NOW(3) AS now
FROM payment_conflict FORCE INDEX (idx_refund_status_created)
WHERE refund_status = 'owed'`
	conflictsTotalSQL = `SELECT COUNT(*) FROM payment_conflict FORCE INDEX (idx_refund_status_created)`
)

func (store) refundsOwed(ctx context.Context, q sqlx.QueryerContext) (Summary, error) {
	var row struct {
		N      int          `db:"n"`
		Amount string       `db:"amount"`
		Oldest sql.NullTime `db:"oldest"`
		Now    time.Time    `db:"now"`
	}
	if err := sqlx.GetContext(ctx, q, &row, refundsOwedSQL); err != nil {
		return Summary{}, fmt.Errorf("sum up refunds owed: %w", err)
	}
	r := Summary{Count: row.N, Amount: row.Amount}
	if row.Oldest.Valid {
		t := row.Oldest.Time
		r.Oldest, r.OldestAge = &t, max(row.Now.Sub(t), 0)
	}
	if err := sqlx.GetContext(ctx, q, &r.Total, conflictsTotalSQL); err != nil {
		return Summary{}, fmt.Errorf("count payment conflicts: %w", err)
	}
	return r, nil
}

// conflictWindowByIDSQL: newest id first from the cursor. Primary key
// backwards.
const conflictWindowByIDSQL = `
SELECT id, created_at AS at, TRUE AS hit FROM payment_conflict FORCE INDEX (PRIMARY)
WHERE id < :before_id ORDER BY id DESC LIMIT :window`

// conflictWindowByStatusSQL: one refund status, newest first from the
// cursor. idx_refund_status_created (refund_status, created_at, id)
// backwards.
const conflictWindowByStatusSQL = `
SELECT id, created_at AS at, TRUE AS hit FROM payment_conflict FORCE INDEX (idx_refund_status_created)
WHERE refund_status = :status AND (created_at < :before_at OR (created_at = :before_at AND id < :before_id))
ORDER BY created_at DESC, id DESC LIMIT :window`

// conflictsByIDSQL reads listed conflicts (literal id list) by primary key.
const conflictsByIDSQL = `SELECT ` + conflictColumns + ` FROM payment_conflict FORCE INDEX (PRIMARY) WHERE id IN (%s)`

// conflictsOfOrderSQL reads one order's conflicts, by order number,
// through idx_order_no.
const conflictsOfOrderSQL = `SELECT ` + conflictColumns + ` FROM payment_conflict FORCE INDEX (idx_order_no)
WHERE order_no = ? ORDER BY id DESC`

// conflictList reads payment_conflict for Ops and OfOrder: one conflict,
// the lists (by id, and the console's page) and one order's conflicts, on
// the statements above.
var conflictList = oplist.Table[Conflict]{Noun: "payment conflicts", One: "payment conflict",
	GetSQL: conflictSQL, ListSQL: listConflictsSQL,
	WindowByIDSQL: conflictWindowByIDSQL, WindowByStatusSQL: conflictWindowByStatusSQL,
	ByIDSQL: conflictsByIDSQL, OfOrderSQL: conflictsOfOrderSQL, ID: func(c Conflict) int64 { return c.ID }}
