package orders

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// This file holds the SQL of the payment step (payment.go) and of late
// payments (Pay).

// readOrdersSQL re-reads the orders of a page before their trades are closed
// at the payment side.
// Params: the id list (literal). A plain consistent read through the primary
// key: no locks (the close transaction locks and re-checks the rows). One row
// per id that exists.
const readOrdersSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE id IN (%s)`

func (store) readOrders(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(readOrdersSQL, intList(ids))); err != nil {
		return nil, fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	return rows, nil
}

// recordPaymentConflictSQL records, inside Pay's transaction, a payment that
// arrived for a closed order: a refund is owed.
//
// Params: order_no, order id. The amount is the order's pay_amount; paid_at
// is when the payment was reported (database clock, session time zone).
// uk_order_no keeps one row per order: a repeated notification changes
// nothing (the no-op update reports 0 rows affected, a new row 1). The order
// row is locked by Pay, so two payments of one order cannot race here.
const recordPaymentConflictSQL = `
INSERT INTO payment_conflict (order_no, pay_amount, paid_at, created_at)
VALUES (?, (SELECT pay_amount FROM order_info WHERE id = ?), NOW(3), NOW(3))
ON DUPLICATE KEY UPDATE order_no = order_no`

func (store) recordPaymentConflict(ctx context.Context, e sqlx.ExecerContext, orderNo string, id int64) (bool, error) {
	res, err := e.ExecContext(ctx, recordPaymentConflictSQL, orderNo, id)
	if err != nil {
		return false, fmt.Errorf("record payment conflict of order %s: %w", orderNo, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
