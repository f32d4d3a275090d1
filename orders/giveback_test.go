package orders_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
)

// A coupon by id whose row names its order (coupon.orderNo) must name the
// order that holds it, in a page as alone: an order whose coupon_id is a
// coupon named by another order of the page (the same one as that order's,
// or a second one) goes to a dead letter, and its own coupon row stays
// used, whatever the page size. The page's one-statement restore checked
// only that each coupon named one of the page's orders and counted
// distinct coupons, so in a page such an order closed, leaving its own
// coupon row used for good.
func TestCouponByIDNamesItsOwnOrderInAPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// borrow points B's coupon_id at a coupon named by another order
		// of the page, and returns that coupon's id.
		borrow func(t *testing.T, b *testBundle) int64
	}{
		{"A's coupon", func(t *testing.T, b *testBundle) int64 {
			return b.ids(t, `SELECT coupon_id FROM order_info WHERE order_no = 'A'`)[0]
		}},
		{"a second coupon of C", func(t *testing.T, b *testBundle) int64 {
			res, err := b.DB.ExecContext(b.Ctx, `INSERT INTO user_coupon (user_id, status, order_no) VALUES (1, 1, 'C')`)
			require.NoError(t, err)
			id, err := res.LastInsertId()
			require.NoError(t, err)
			return id
		}},
	} {
		for _, pageSize := range []int{1, 10} {
			t.Run(fmt.Sprintf("%s,pageSize=%d", tc.name, pageSize), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				for _, no := range []string{"A", "B", "C"} {
					ordertest.Order(t, b.DB.DB, ordertest.OrderOpts{OrderNo: no, Age: time.Hour, Coupon: true,
						Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
				}
				own := b.ids(t, `SELECT coupon_id FROM order_info WHERE order_no = 'B'`)[0]
				borrowed := tc.borrow(t, b)
				_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET coupon_id = ? WHERE order_no = 'B'`, borrowed)
				require.NoError(t, err)

				st := b.run(t, orders.RunOptions{PageSize: pageSize})
				require.Equal(t, 2, st.Closed, st.String())
				require.Equal(t, 1, st.DeadLettered, st.String())
				require.Contains(t, b.deadLetters(t)["B"].LastError, "not locked by this order")
				require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM user_coupon WHERE id = ? AND status = 1 AND order_no = 'B'`, own),
					"B's own coupon stays used: B is not closed")
				require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM order_info WHERE order_no = 'B' AND status <> 0`))
			})
		}
	}
}
