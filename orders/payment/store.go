package payment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This file holds the order service's SQL (PlaceOrder, Pay, Ship,
// Confirm, IssueCoupon, AddStock) on the executor's own schema. The lock
// order is the close path's: order row, inventory by ascending sku_id,
// coupon. SKU and quantity lists are rendered as literals (int64 values:
// digits only); strings are always bound.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx.
type store struct{}

// order is an order row as Pay locks it.
type order struct {
	ID             int64         `db:"id"`
	OrderNo        string        `db:"order_no"`
	Status         int           `db:"status"`
	CreateTime     time.Time     `db:"create_time"`
	TimeoutMinutes int           `db:"timeout_minutes"`
	CouponID       sql.NullInt64 `db:"coupon_id"`
}

// lockOrderByNoSQL locks one order, by its number, for payment. Record
// lock via uk_order_no and the primary key; zero or one row.
const lockOrderByNoSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE order_no = ? FOR UPDATE`

func (store) lockOrderByNo(ctx context.Context, q sqlx.QueryerContext, orderNo string) (order, bool, error) {
	var o order
	err := sqlx.GetContext(ctx, q, &o, lockOrderByNoSQL, orderNo)
	if errors.Is(err, sql.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("lock order %s: %w", orderNo, err)
	}
	return o, true, nil
}

// item is one order line.
type item struct {
	OrderNo  string `db:"order_no"`
	SKUID    int64  `db:"sku_id"`
	Quantity int64  `db:"quantity"`
}

func (store) orderItems(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]item, error) {
	// The close's item read (closesql.Default.OrderItems: idx_order_no
	// forced, the number bound by sqlx.In). No locks: lines never change
	// after the order is placed, and the order row is locked.
	query, args, err := sqlx.In(closesql.Default.OrderItems, []string{orderNo})
	if err != nil {
		return nil, err
	}
	var rows []item
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("read items of %s: %w", orderNo, err)
	}
	return rows, nil
}

// lockStock locks the stock rows of qty's SKUs before they are changed,
// with the close's statement (closesql.Default.Stock.Lock): record locks
// on the primary key in ascending sku_id order, the order the close takes
// them in, so payments, placements and closes sharing hot SKUs never
// deadlock. One row per SKU that exists.
func (store) lockStock(ctx context.Context, q sqlx.QueryerContext, qty map[int64]int64) error {
	var rows []struct {
		SKUID     int64 `db:"sku_id"`
		Available int64 `db:"available"`
		Locked    int64 `db:"locked"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(closesql.Default.Stock.Lock, skuList(qty))); err != nil {
		return fmt.Errorf("lock stock of %d skus: %w", len(qty), err)
	}
	return nil
}

// rowsChanged is the number of rows a statement changed, given what it
// returned; its error is wrapped with what it did (format and args).
func rowsChanged(res sql.Result, err error, format string, args ...any) (int64, error) {
	if err != nil {
		return 0, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
	}
	return res.RowsAffected()
}

// skuList is qty's SKUs, ascending, as a literal list.
func skuList(qty map[int64]int64) string { return sqlexec.IntList(slices.Sorted(maps.Keys(qty))) }

// payOrderSQL is the payment's status CAS on one order id, unpaid to paid,
// stamping pay_time with the database clock (the fulfillment-timeout job
// counts from it). The WHERE repeats status = 0 so a closed order is never
// paid; expects one row.
const payOrderSQL = `UPDATE order_info SET status = 1, pay_time = NOW(3) WHERE id = ? AND status = 0`

func (store) payOrder(ctx context.Context, e sqlx.ExecerContext, id int64) (int64, error) {
	res, err := e.ExecContext(ctx, payOrderSQL, id)
	return rowsChanged(res, err, "pay order %d", id)
}

// consumeStockSQL takes a paid order's quantities out of locked stock.
// %[1]s is the per-SKU quantity CASE, %[2]s the sku_id list (literals). The
// rows are locked beforehand in ascending sku_id order; `locked >= qty` keeps
// locked from going negative. Expects one row per SKU.
const consumeStockSQL = `
UPDATE inventory SET locked = locked - %[1]s
WHERE sku_id IN (%[2]s) AND locked >= %[1]s`

func (store) consumeStock(ctx context.Context, e sqlx.ExecerContext, qty map[int64]int64) (int64, error) {
	res, err := e.ExecContext(ctx, fmt.Sprintf(consumeStockSQL, sqlexec.QtyCase("sku_id", qty), skuList(qty)))
	return rowsChanged(res, err, "consume stock of %d skus", len(qty))
}

// useCouponSQL marks a paid order's coupon used. Expects one row: the
// coupon locked by this order (status 1).
const useCouponSQL = `UPDATE user_coupon SET status = 2 WHERE id = :id AND status = 1 AND order_no = :order_no`

func (store) useCoupon(ctx context.Context, e sqlx.ExecerContext, id int64, orderNo string) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, useCouponSQL, map[string]any{"id": id, "order_no": orderNo})
	return rowsChanged(res, err, "use coupon %d", id)
}

// reserveStockSQL moves a new order's quantities from available to locked.
// %[1]s is the per-SKU quantity CASE, %[2]s the sku_id list (literals). Rows
// locked beforehand in ascending sku_id order; `available >= qty` refuses to
// oversell. Expects one row per SKU, fewer means out of stock.
const reserveStockSQL = `
UPDATE inventory SET available = available - %[1]s, locked = locked + %[1]s
WHERE sku_id IN (%[2]s) AND available >= %[1]s`

func (store) reserveStock(ctx context.Context, e sqlx.ExecerContext, qty map[int64]int64) (int64, error) {
	res, err := e.ExecContext(ctx, fmt.Sprintf(reserveStockSQL, sqlexec.QtyCase("sku_id", qty), skuList(qty)))
	return rowsChanged(res, err, "reserve stock of %d skus", len(qty))
}

// lockCouponForOrderSQL locks an unused coupon for a new order. Expects
// one row; zero means the coupon is not unused (or does not exist).
const lockCouponForOrderSQL = `UPDATE user_coupon SET status = 1, order_no = :order_no WHERE id = :id AND status = 0`

func (store) lockCouponForOrder(ctx context.Context, e sqlx.ExecerContext, id int64, orderNo string) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, lockCouponForOrderSQL, map[string]any{"id": id, "order_no": orderNo})
	return rowsChanged(res, err, "lock coupon %d", id)
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
	query, args := sqlexec.Values(insertItemsSQL, "(?,?,?)", items, func(args []any, it Item) []any {
		return append(args, orderNo, it.SKUID, it.Quantity)
	})
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
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

// The steps after payment (Ship, Confirm) and the status read that explains
// a step that changed nothing.

// shipOrderSQL is the order service's shipping CAS of one order (by
// number), paid to shipped. uk_order_no; expects one row (none: not paid, or no
// such order). ship_time is the database clock.
const shipOrderSQL = `
UPDATE order_info SET status = 3, ship_time = NOW(3) WHERE order_no = ? AND status = 1`

func (store) shipOrder(ctx context.Context, e sqlx.ExecerContext, orderNo string) (int64, error) {
	res, err := e.ExecContext(ctx, shipOrderSQL, orderNo)
	return rowsChanged(res, err, "ship order %s", orderNo)
}

// confirmOrderSQL is the buyer's confirmation CAS of one order (by
// number), shipped to completed. uk_order_no; expects one row (none: not shipped, or no
// such order).
const confirmOrderSQL = `
UPDATE order_info SET status = 4, complete_time = NOW(3) WHERE order_no = ? AND status = 3`

func (store) confirmOrder(ctx context.Context, e sqlx.ExecerContext, orderNo string) (int64, error) {
	res, err := e.ExecContext(ctx, confirmOrderSQL, orderNo)
	return rowsChanged(res, err, "confirm order %s", orderNo)
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

// The payment records: a payment that could not be taken (a refund owed)
// and the payment an order is paid with.

// recordPaymentConflictSQL records, inside Pay's transaction, a payment
// that cannot be taken: a refund is owed.
//
// The amount is NULL for the order's pay_amount. paid_at is when the payment was reported (database
// clock, session time zone). uk_payment_id keeps one row per payment: a
// repeated notification changes nothing (the no-op update reports 0 rows
// affected, a new row 1). The order row is locked by Pay, so two
// notifications of one order cannot race here.
const recordPaymentConflictSQL = `
INSERT INTO payment_conflict (payment_id, order_no, pay_amount, reason, channel, paid_at, created_at)
VALUES (:payment_id, :order_no, COALESCE(:amount, (SELECT pay_amount FROM order_info WHERE id = :order_id)),
        :reason, :channel, NOW(3), NOW(3))
ON DUPLICATE KEY UPDATE payment_id = payment_id`

// paymentParams are recordPaymentConflictSQL's and insertOrderPaymentSQL's.
type paymentParams struct {
	PaymentID string `db:"payment_id"`
	OrderNo   string `db:"order_no"`
	OrderID   int64  `db:"order_id"`
	Amount    any    `db:"amount"` // nullAmount
	Reason    string `db:"reason"`
	Channel   string `db:"channel"`
}

func newPaymentParams(o order, n Notice, reason string) paymentParams {
	return paymentParams{PaymentID: n.PaymentID, OrderNo: o.OrderNo, OrderID: o.ID, Amount: nullAmount(n.Amount),
		Reason: reason, Channel: n.Channel}
}

func (store) recordPaymentConflict(ctx context.Context, e sqlx.ExecerContext, o order, n Notice, reason string) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, recordPaymentConflictSQL, newPaymentParams(o, n, reason))
	if err != nil {
		return false, fmt.Errorf("record payment conflict %s of order %s: %w", n.PaymentID, o.OrderNo, err)
	}
	k, err := res.RowsAffected()
	return k == 1, err
}

// conflictOrderSQL reads which order the recorded conflict of a payment
// id belongs to. One uk_payment_id probe; zero or one row.
const conflictOrderSQL = `SELECT order_no FROM payment_conflict WHERE payment_id = ?`

func (store) conflictOrder(ctx context.Context, q sqlx.QueryerContext, paymentID string) (string, error) {
	var no string
	if err := sqlx.GetContext(ctx, q, &no, conflictOrderSQL, paymentID); err != nil {
		return "", fmt.Errorf("read payment conflict %s: %w", paymentID, err)
	}
	return no, nil
}

// orderPaymentSQL reads the payment a paid order (by number) was paid
// with. One uk_order_no probe; zero (paid before payments were
// recorded) or one row.
const orderPaymentSQL = `SELECT payment_id FROM order_payment WHERE order_no = ?`

func (store) orderPayment(ctx context.Context, q sqlx.QueryerContext, orderNo string) (string, bool, error) {
	var id string
	err := sqlx.GetContext(ctx, q, &id, orderPaymentSQL, orderNo)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the payment of order %s: %w", orderNo, err)
	}
	return id, true, nil
}

// insertOrderPaymentSQL records the payment an order is paid with, in the
// transaction that pays it (the amount NULL for the order's pay_amount).
// uk_payment_id refuses a payment id
// already used for another order, uk_order_no a second payment (Pay checks
// the order is unpaid under its row lock first).
const insertOrderPaymentSQL = `
INSERT INTO order_payment (payment_id, order_no, amount, channel, paid_at, created_at)
VALUES (:payment_id, :order_no, COALESCE(:amount, (SELECT pay_amount FROM order_info WHERE id = :order_id)),
        :channel, NOW(3), NOW(3))`

func (store) insertOrderPayment(ctx context.Context, e sqlx.ExecerContext, o order, n Notice) error {
	if _, err := sqlexec.ExecNamed(ctx, e, insertOrderPaymentSQL, newPaymentParams(o, n, "")); err != nil {
		return fmt.Errorf("record payment %s of order %s: %w", n.PaymentID, o.OrderNo, err)
	}
	return nil
}

// nullAmount is a notice's amount as a parameter: NULL when it has none.
func nullAmount(a string) any {
	if a == "" {
		return nil
	}
	return a
}
