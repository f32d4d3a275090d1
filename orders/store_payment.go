package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the payment step (payment.go) and of late
// payments (Pay).

// readOrders re-reads the orders of a page before their trades are closed
// at the payment side (closeSQL.readOrders). One row per id that exists.
func (s store) readOrders(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(s.sql().readOrders, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	return rows, nil
}

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

func newPaymentParams(o orderRow, n Notice, reason string) paymentParams {
	return paymentParams{PaymentID: n.PaymentID, OrderNo: o.OrderNo, OrderID: o.ID, Amount: nullAmount(n.Amount),
		Reason: reason, Channel: n.Channel}
}

func (store) recordPaymentConflict(ctx context.Context, e sqlx.ExecerContext, o orderRow, n Notice, reason string) (bool, error) {
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

func (store) insertOrderPayment(ctx context.Context, e sqlx.ExecerContext, o orderRow, n Notice) error {
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
