package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the order service's SQL (Pay, PlaceOrder, IssueCoupon).
// The lock order is the close path's: order row, inventory by ascending
// sku_id, coupon.

// lockOrderByNoSQL locks one order, by its number, for payment. Record
// lock via uk_order_no and the primary key; zero or one row.
const lockOrderByNoSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE order_no = ? FOR UPDATE`

func (store) lockOrderByNo(ctx context.Context, q sqlx.QueryerContext, orderNo string) (orderRow, bool, error) {
	var o orderRow
	err := sqlx.GetContext(ctx, q, &o, lockOrderByNoSQL, orderNo)
	if errors.Is(err, sql.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("lock order %s: %w", orderNo, err)
	}
	return o, true, nil
}

// payOrderSQL is the payment's status CAS on one order id, unpaid to paid,
// stamping pay_time with the database clock (the fulfillment-timeout job
// counts from it). The WHERE repeats status = 0 so a closed order is never
// paid; expects one row.
const payOrderSQL = `UPDATE order_info SET status = 1, pay_time = NOW(3) WHERE id = ? AND status = 0`

func (store) payOrder(ctx context.Context, e sqlx.ExecerContext, id int64) (int64, error) {
	res, err := e.ExecContext(ctx, payOrderSQL, id)
	if err != nil {
		return 0, fmt.Errorf("pay order %d: %w", id, err)
	}
	return res.RowsAffected()
}

// consumeStockSQL takes a paid order's quantities out of locked stock.
// %[1]s is the per-SKU quantity CASE, %[2]s the sku_id list (literals). The
// rows are locked beforehand in ascending sku_id order; `locked >= qty` keeps
// locked from going negative. Expects one row per SKU.
const consumeStockSQL = `
UPDATE inventory SET locked = locked - %[1]s
WHERE sku_id IN (%[2]s) AND locked >= %[1]s`

func (store) consumeStock(ctx context.Context, e sqlx.ExecerContext, deltas []skuDelta) (int64, error) {
	res, err := e.ExecContext(ctx, fmt.Sprintf(consumeStockSQL, deltaCase(deltas), deltaSKUs(deltas)))
	if err != nil {
		return 0, fmt.Errorf("consume stock of %d skus: %w", len(deltas), err)
	}
	return res.RowsAffected()
}

// useCouponSQL marks a paid order's coupon used. Expects one row: the
// coupon locked by this order (status 1).
const useCouponSQL = `UPDATE user_coupon SET status = 2 WHERE id = :id AND status = 1 AND order_no = :order_no`

func (store) useCoupon(ctx context.Context, e sqlx.ExecerContext, id int64, orderNo string) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, useCouponSQL, map[string]any{"id": id, "order_no": orderNo})
	if err != nil {
		return 0, fmt.Errorf("use coupon %d: %w", id, err)
	}
	return res.RowsAffected()
}

// reserveStockSQL moves a new order's quantities from available to locked.
// %[1]s is the per-SKU quantity CASE, %[2]s the sku_id list (literals). Rows
// locked beforehand in ascending sku_id order; `available >= qty` refuses to
// oversell. Expects one row per SKU, fewer means out of stock.
const reserveStockSQL = `
UPDATE inventory SET available = available - %[1]s, locked = locked + %[1]s
WHERE sku_id IN (%[2]s) AND available >= %[1]s`

func (store) reserveStock(ctx context.Context, e sqlx.ExecerContext, deltas []skuDelta) (int64, error) {
	res, err := e.ExecContext(ctx, fmt.Sprintf(reserveStockSQL, deltaCase(deltas), deltaSKUs(deltas)))
	if err != nil {
		return 0, fmt.Errorf("reserve stock of %d skus: %w", len(deltas), err)
	}
	return res.RowsAffected()
}

// lockCouponForOrderSQL locks an unused coupon for a new order. Expects
// one row; zero means the coupon is not unused (or does not exist).
const lockCouponForOrderSQL = `UPDATE user_coupon SET status = 1, order_no = :order_no WHERE id = :id AND status = 0`

func (store) lockCouponForOrder(ctx context.Context, e sqlx.ExecerContext, id int64, orderNo string) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, lockCouponForOrderSQL, map[string]any{"id": id, "order_no": orderNo})
	if err != nil {
		return 0, fmt.Errorf("lock coupon %d: %w", id, err)
	}
	return res.RowsAffected()
}

// insertOrderSQL places an unpaid order stamped with the database clock;
// coupon_id is NULL for none. uk_order_no rejects a duplicate order
// number.
const insertOrderSQL = `
INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes, coupon_id)
VALUES (:order_no, :user_id, 0, NOW(), :timeout_minutes, :coupon_id)`

func (store) insertOrder(ctx context.Context, e sqlx.ExecerContext, o NewOrder, timeout int) (int64, error) {
	var coupon sql.NullInt64
	if o.CouponID != 0 {
		coupon = sql.NullInt64{Int64: o.CouponID, Valid: true}
	}
	res, err := sqlexec.ExecNamed(ctx, e, insertOrderSQL, map[string]any{
		"order_no": o.OrderNo, "user_id": o.UserID, "timeout_minutes": timeout, "coupon_id": coupon})
	if err != nil {
		return 0, fmt.Errorf("insert order %s: %w", o.OrderNo, err)
	}
	return res.LastInsertId()
}

// insertItemsSQL, followed by one (order_no, sku_id, quantity) row per
// line, adds an order's lines.
const insertItemsSQL = `INSERT INTO order_item (order_no, sku_id, quantity) VALUES `

func (store) insertItems(ctx context.Context, e sqlx.ExecerContext, orderNo string, items []Item) error {
	var b strings.Builder
	b.WriteString(insertItemsSQL)
	args := make([]any, 0, 3*len(items))
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?)")
		args = append(args, orderNo, it.SKUID, it.Quantity)
	}
	if _, err := e.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("insert items of %s: %w", orderNo, err)
	}
	return nil
}

// insertCouponSQL issues an unused coupon to a user.
const insertCouponSQL = `INSERT INTO user_coupon (user_id, status) VALUES (?, 0)`

func (store) insertCoupon(ctx context.Context, e sqlx.ExecerContext, userID int64) (int64, error) {
	res, err := e.ExecContext(ctx, insertCouponSQL, userID)
	if err != nil {
		return 0, fmt.Errorf("issue coupon to user %d: %w", userID, err)
	}
	return res.LastInsertId()
}

// addStockSQL creates or tops up a SKU's available stock. One row
// inserted or changed.
const addStockSQL = `
INSERT INTO inventory (sku_id, available, locked) VALUES (:sku_id, :qty, 0)
ON DUPLICATE KEY UPDATE available = available + :qty`

func (store) addStock(ctx context.Context, e sqlx.ExecerContext, sku, qty int64) error {
	if _, err := sqlexec.ExecNamed(ctx, e, addStockSQL, map[string]any{"sku_id": sku, "qty": qty}); err != nil {
		return fmt.Errorf("add stock to sku %d: %w", sku, err)
	}
	return nil
}
