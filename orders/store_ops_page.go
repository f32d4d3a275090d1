package orders

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the SQL of the console's refund pages
// (ops_page.go): search windows of keys in keyset order, then the rows of a
// page by primary key, and one order's rows. No locks.

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

func (store) conflictWindow(ctx context.Context, q sqlx.QueryerContext, f RefundQuery, window int) ([]oplist.WindowKey, error) {
	var keys []oplist.WindowKey
	var err error
	p := oplist.WindowParams{Window: window}
	if f.Status == "" {
		p.BeforeID = f.After.BeforeID()
		err = sqlexec.SelectNamed(ctx, q, &keys, conflictWindowByIDSQL, p)
	} else {
		p.Status = f.Status
		p.BeforeAt, p.BeforeID = f.After.Before(sqlexec.Latest)
		err = sqlexec.SelectNamed(ctx, q, &keys, conflictWindowByStatusSQL, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list payment conflicts: %w", err)
	}
	return keys, nil
}

// conflictsByIDSQL reads listed conflicts (literal id list) by primary key.
const conflictsByIDSQL = `SELECT ` + conflictColumns + ` FROM payment_conflict FORCE INDEX (PRIMARY) WHERE id IN (%s)`

func (store) conflictsByID(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]PaymentConflict, error) {
	rows := []PaymentConflict{}
	if len(ids) == 0 {
		return rows, nil
	}
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(conflictsByIDSQL, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("read %d payment conflicts: %w", len(ids), err)
	}
	return rows, nil
}

// conflictsOfOrderSQL reads one order's conflicts, by order number,
// through idx_order_no.
const conflictsOfOrderSQL = `SELECT ` + conflictColumns + ` FROM payment_conflict FORCE INDEX (idx_order_no)
WHERE order_no = ? ORDER BY id DESC`

func (store) conflictsOfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]PaymentConflict, error) {
	rows := []PaymentConflict{}
	if err := sqlx.SelectContext(ctx, q, &rows, conflictsOfOrderSQL, orderNo); err != nil {
		return nil, fmt.Errorf("read payment conflicts of %s: %w", orderNo, err)
	}
	return rows, nil
}
