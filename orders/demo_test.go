package orders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
)

func TestGenerateDemo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := orders.DemoSpec{Orders: 10_000, SKUs: 300, DueFraction: 0.7, PaidFraction: 0.2, NotDueFraction: 0.1, CouponFraction: 0.3, Reset: true}
	res, err := orders.GenerateDemo(b.ctx, b.db.DB, spec)
	require.NoError(t, err)
	require.Equal(t, 10_000, res.Orders)
	require.Equal(t, res.Orders, res.Due+res.Paid+res.NotDue)
	require.InDelta(t, 7000, res.Due, 300)
	require.InDelta(t, 2000, res.Paid, 300)
	require.InDelta(t, 3000, res.Coupons, 300)
	require.Equal(t, int64(1), res.FirstID)
	require.Equal(t, int64(10_000), res.LastID)

	c := b.counts(t)
	require.Equal(t, res.Paid, c.Paid)
	require.Equal(t, res.Due+res.NotDue, c.Unpaid)
	require.Equal(t, res.Due, c.Due, "due by the database clock")
	require.Equal(t, res.Items, b.count(t, `SELECT COUNT(*) FROM order_item`))
	require.Equal(t, 300*1_000_000, b.count(t, `SELECT SUM(available + locked) FROM inventory`)+
		b.count(t, `SELECT COALESCE(SUM(it.quantity), 0) FROM order_item it JOIN order_info o ON o.order_no = it.order_no WHERE o.status = 1`))
	var oldestNotDue time.Time
	require.NoError(t, b.db.GetContext(b.ctx, &oldestNotDue, `SELECT MIN(create_time) FROM order_info
		WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE > NOW()`))
	require.True(t, !oldestNotDue.Before(res.Now.Add(-15*time.Minute)), "not-due orders stay not due for half their timeout")

	// Invariants hold on fresh data: a baseline of uniform totals checks out.
	uniform := &ordertest.Baseline{Stock: map[int64]int64{}}
	for sku := int64(1); sku <= 300; sku++ {
		uniform.Stock[sku] = 1_000_000
	}
	require.NoError(t, ordertest.Check(b.ctx, b.db, uniform))

	// Appending keeps ids and numbers unique and adds stock.
	more, err := orders.GenerateDemo(b.ctx, b.db.DB, orders.DemoSpec{Orders: 500, SKUs: 300, Seed: 2})
	require.NoError(t, err)
	require.Equal(t, int64(10_001), more.FirstID)
	for sku := range uniform.Stock {
		uniform.Stock[sku] = 2_000_000
	}
	require.NoError(t, ordertest.Check(b.ctx, b.db, uniform))

	// Reset starts over.
	_, err = orders.GenerateDemo(b.ctx, b.db.DB, orders.DemoSpec{Orders: 10, SKUs: 5, Reset: true})
	require.NoError(t, err)
	require.Equal(t, 10, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.Equal(t, 5, b.count(t, `SELECT COUNT(*) FROM inventory`))

	_, err = orders.GenerateDemo(b.ctx, b.db.DB, orders.DemoSpec{Orders: 10, DueFraction: 0.8, PaidFraction: 0.5})
	require.Error(t, err, "fractions above 1")
	_, err = orders.GenerateDemo(b.ctx, b.db.DB, orders.DemoSpec{Orders: 10, OrderNoPrefix: "x'; DROP"})
	require.Error(t, err, "unsafe prefix")
}
