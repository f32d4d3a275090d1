package payment

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// TestHotStatementPlans runs the statements of PlaceOrder, Pay, Ship and
// Confirm through plantest.Check (see orders' TestHotStatementPlans): with
// the statistics as the load left them and with statistics that lie, each
// must keep its plan and read at most about 3 rows or index entries for
// the one order it handles.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	in := func(q string, args ...any) plantest.Query { return plantest.In(t, q, args...) }
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	one := f.unpaid.OrderNo
	plantest.Check(t, f.db.DB, []string{"order_info", "order_item", "inventory", "user_coupon", "payment_conflict", "order_payment"}, []plantest.Statement{
		// Ship and Confirm (the lifecycle jobs' statements are package lifecycle's).
		{Name: "service: ship", Query: q(shipOrderSQL, f.paidNo), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		{Name: "service: confirm", Query: q(confirmOrderSQL, f.shippedNo), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		{Name: "service: status", Query: q(orderStatusSQL, one), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		// Pay and PlaceOrder.
		{Name: "pay: lock order", Query: q(lockOrderByNoSQL, one), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		{Name: "pay: items", Query: in(closesql.Default.OrderItems, []string{one}), Units: 1, Plan: uses("order_item", "idx_order_no", "range", "ref")},
		{Name: "pay: status CAS", Query: q(payOrderSQL, f.unpaid.ID), Units: 1, Plan: plantest.PK("order_info")},
		{Name: "pay: lock stock", Query: q(fmt.Sprintf(closesql.Default.Stock.Lock, skuList(f.qty))), Units: 1, Plan: plantest.PK("inventory")},
		{Name: "pay: consume stock", Query: q(fmt.Sprintf(consumeStockSQL, sqlexec.QtyCase("sku_id", f.qty), skuList(f.qty))), Units: 1, Plan: plantest.PK("inventory")},
		{Name: "pay: use coupon", Query: named(useCouponSQL, map[string]any{"id": f.coupon, "order_no": f.couponNo}), Units: 1, Plan: plantest.PK("user_coupon")},
		{Name: "pay: payment conflict", Query: named(recordPaymentConflictSQL, paymentParams{PaymentID: "wx-new", OrderNo: one, OrderID: f.unpaid.ID, Reason: conflictLate, Channel: "wechat"}), Units: 1, Plan: plantest.PK("order_info")},
		{Name: "pay: conflict's order", Query: q(conflictOrderSQL, f.conflictID), Units: 1, Plan: plantest.ByKey("payment_conflict", "uk_payment_id")},
		{Name: "pay: order's payment", Query: q(orderPaymentSQL, f.paidNo), Units: 1, Plan: plantest.ByKey("order_payment", "uk_order_no")},
		{Name: "pay: record payment", Query: named(insertOrderPaymentSQL, paymentParams{PaymentID: "wx-new", OrderNo: one, OrderID: f.unpaid.ID, Amount: "12.30", Channel: "wechat"}), Units: 1, Plan: plantest.PK("order_info")},
		{Name: "place: reserve stock", Query: q(fmt.Sprintf(reserveStockSQL, sqlexec.QtyCase("sku_id", f.qty), skuList(f.qty))), Units: 1, Plan: plantest.PK("inventory")},
		{Name: "place: lock coupon", Query: named(lockCouponForOrderSQL, map[string]any{"order_no": one, "id": f.coupon}), Units: 1, Plan: plantest.PK("user_coupon")},
	})
}

// planFixture is a shop's orders (ordertest.Shop) with the payments of
// its paid orders and the refunds owed of a while, and the rows one
// payment works on.
type planFixture struct {
	db         *dbtest.DB
	unpaid     order           // an unpaid order
	qty        map[int64]int64 // two SKUs' quantities
	coupon     int64           // a coupon locked by an unpaid order
	couponNo   string          // that order
	paidNo     string          // a paid order
	shippedNo  string          // a shipped order
	conflictID string          // a conflict's payment id
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	ordertest.Shop(t, db.DB)
	for _, stmt := range []string{
		// Refunds owed, most of them long refunded; the payments of paid orders.
		`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, refund_status)
			SELECT CONCAT('wx-', id), order_no, 10, NOW(3), IF(id % 500 = 7, 'owed', 'refunded') FROM order_info WHERE id % 50 = 7`,
		`INSERT INTO order_payment (payment_id, order_no, amount, paid_at)
			SELECT CONCAT('pay-', id), order_no, 10, NOW(3) FROM order_info WHERE status IN (1, 3)`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	get := func(dst any, query string) {
		t.Helper()
		require.NoError(t, sqlx.GetContext(ctx, db, dst, query), query)
	}
	get(&f.unpaid, `SELECT id, order_no, status, create_time, timeout_minutes, coupon_id FROM order_info WHERE status = 0 ORDER BY id LIMIT 1`)
	var skus []int64
	require.NoError(t, db.SelectContext(ctx, &skus, `SELECT sku_id FROM inventory ORDER BY sku_id LIMIT 2`))
	require.Len(t, skus, 2)
	f.qty = map[int64]int64{skus[0]: 1, skus[1]: 2}
	get(&f.coupon, `SELECT coupon_id FROM order_info WHERE status = 0 AND coupon_id IS NOT NULL ORDER BY id LIMIT 1`)
	get(&f.couponNo, `SELECT order_no FROM order_info WHERE status = 0 AND coupon_id IS NOT NULL ORDER BY id LIMIT 1`)
	get(&f.paidNo, `SELECT order_no FROM order_info WHERE status = 1 ORDER BY id LIMIT 1`)
	get(&f.shippedNo, `SELECT order_no FROM order_info WHERE status = 3 ORDER BY id LIMIT 1`)
	get(&f.conflictID, `SELECT payment_id FROM payment_conflict ORDER BY id LIMIT 1`)
	return f
}
