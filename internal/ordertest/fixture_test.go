package ordertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
)

// Orders built one by one hold what placing, paying and closing leave:
// the checker finds nothing wrong, and the rows are exactly as asked.
func TestOrderBuildsExactRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	due := ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: "DUE", Age: time.Hour, Coupon: true,
		Items: []ordertest.Item{{SKU: 1, Qty: 2}, {SKU: 2, Qty: 1}}})
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: "PAID", Status: 1, Coupon: true, Items: []ordertest.Item{{SKU: 1, Qty: 3}}})
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: "CLOSED", Status: 2, Coupon: true, Items: []ordertest.Item{{SKU: 2, Qty: 5}}})
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: "POISON", Age: time.Hour, Items: []ordertest.Item{{SKU: 9, Qty: 1, MissingStock: true}}})

	base, err := ordertest.Snapshot(ctx, db)
	require.NoError(t, err)
	require.NoError(t, ordertest.Check(ctx, db, base))
	c, err := ordertest.Counts(ctx, db)
	require.NoError(t, err)
	require.Equal(t, ordertest.StatusCounts{Unpaid: 2, Paid: 1, Closed: 1, Due: 2}, c)

	var stock []struct {
		SKU       int64 `db:"sku_id"`
		Available int64 `db:"available"`
		Locked    int64 `db:"locked"`
	}
	require.NoError(t, db.SelectContext(ctx, &stock, `SELECT sku_id, available, locked FROM inventory ORDER BY sku_id`))
	require.Len(t, stock, 2, "no row for the missing SKU")
	require.Equal(t, [3]int64{1, 100 - 2 - 3, 2}, [3]int64{stock[0].SKU, stock[0].Available, stock[0].Locked})
	require.Equal(t, [3]int64{2, 100 - 1, 1}, [3]int64{stock[1].SKU, stock[1].Available, stock[1].Locked})

	var coupon struct {
		Status  int    `db:"status"`
		OrderNo string `db:"order_no"`
	}
	require.NoError(t, db.GetContext(ctx, &coupon, `SELECT status, order_no FROM user_coupon WHERE id = ?`, due.CouponID))
	require.Equal(t, 1, coupon.Status)
	require.Equal(t, "DUE", coupon.OrderNo)
}

// Restock gives a poisoned order's SKU the row it lacked, locked as its
// unpaid orders hold it: the checker finds nothing wrong with it.
func TestRestockLocksWhatUnpaidOrdersHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	for _, o := range []ordertest.OrderOpts{
		{OrderNo: "P1", Items: []ordertest.Item{{SKU: 9, Qty: 2, MissingStock: true}}},
		{OrderNo: "P2", Items: []ordertest.Item{{SKU: 9, Qty: 3, MissingStock: true}, {SKU: 1, Qty: 1}}},
		{OrderNo: "PAID", Status: 1, Items: []ordertest.Item{{SKU: 9, Qty: 4, MissingStock: true}}},
	} {
		ordertest.Order(t, db.DB, o)
	}
	ordertest.Restock(t, db.DB, 9, 10)

	var stock struct {
		Available int64 `db:"available"`
		Locked    int64 `db:"locked"`
	}
	require.NoError(t, db.GetContext(ctx, &stock, `SELECT available, locked FROM inventory WHERE sku_id = 9`))
	require.Equal(t, int64(10), stock.Available)
	require.Equal(t, int64(2+3), stock.Locked, "the unpaid orders' units, not the paid one's")
	base, err := ordertest.Snapshot(ctx, db)
	require.NoError(t, err)
	require.NoError(t, ordertest.Check(ctx, db, base))
}
