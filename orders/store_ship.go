package orders

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// This file holds the SQL of the order service's steps after payment,
// Ship and Confirm, and the status read that explains a step that changed
// nothing.

// shipOrderSQL is the order service's shipping CAS of one order (by
// number), paid to shipped. uk_order_no; expects one row (none: not paid, or no
// such order). ship_time is the database clock.
const shipOrderSQL = `
UPDATE order_info SET status = 3, ship_time = NOW(3) WHERE order_no = ? AND status = 1`

func (store) shipOrder(ctx context.Context, e sqlx.ExecerContext, orderNo string) (int64, error) {
	res, err := e.ExecContext(ctx, shipOrderSQL, orderNo)
	if err != nil {
		return 0, fmt.Errorf("ship order %s: %w", orderNo, err)
	}
	return res.RowsAffected()
}

// confirmOrderSQL is the buyer's confirmation CAS of one order (by
// number), shipped to completed. uk_order_no; expects one row (none: not shipped, or no
// such order).
const confirmOrderSQL = `
UPDATE order_info SET status = 4, complete_time = NOW(3) WHERE order_no = ? AND status = 3`

func (store) confirmOrder(ctx context.Context, e sqlx.ExecerContext, orderNo string) (int64, error) {
	res, err := e.ExecContext(ctx, confirmOrderSQL, orderNo)
	if err != nil {
		return 0, fmt.Errorf("confirm order %s: %w", orderNo, err)
	}
	return res.RowsAffected()
}

// orderStatusSQL reads one order's status, by number. Zero or one row.
const orderStatusSQL = `SELECT status FROM order_info WHERE order_no = ?`

func (store) orderStatus(ctx context.Context, q sqlx.QueryerContext, orderNo string) (int, bool, error) {
	var st []int
	if err := sqlx.SelectContext(ctx, q, &st, orderStatusSQL, orderNo); err != nil {
		return 0, false, fmt.Errorf("read status of order %s: %w", orderNo, err)
	}
	if len(st) == 0 {
		return 0, false, nil
	}
	return st[0], true, nil
}
