package ordertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
)

// CheckForeign holds on a freshly placed foreign shop and names each rule
// a wrong close or payment breaks: a giveback made twice or not at all, a
// coupon left used, a paid order cancelled.
func TestCheckForeignCatchesEachRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		rule     string
		breakSQL []string
	}{
		{"", nil},
		{"foreign_points", []string{`UPDATE t_member SET points = points + 30 WHERE id = 1`}},
		{"foreign_locked", []string{`UPDATE t_sku_stock SET locked = locked - 2 WHERE sku = 1`}},
		{"foreign_coupon", []string{`UPDATE t_coupon_history SET use_status = 0 WHERE coupon_id = 501`}},
		{"foreign_close_log", []string{`UPDATE t_order SET order_status = 4 WHERE order_sn = 'SN-2'`}},
		{"foreign_paid_closed", []string{`UPDATE t_order SET order_status = 4, cancel_time = NOW(), updated_at = NOW() WHERE order_sn = 'SN-3'`,
			`INSERT INTO order_close_log (order_no, closed_at, reason) VALUES ('SN-3', NOW(), 'x')`}},
		{"foreign_log_not_closed", []string{`INSERT INTO order_close_log (order_no, closed_at, reason) VALUES ('SN-1', NOW(), 'x')`}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t)
			ordertest.ForeignTables(t, db.DB)
			ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-1", MemberID: 1, Age: time.Hour, Coupon: 501, Points: 30,
				Items: []ordertest.Item{{SKU: 1, Qty: 2}}})
			ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-2", MemberID: 2, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
			ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-3", MemberID: 2, Status: ordertest.ForeignPaid,
				Items: []ordertest.Item{{SKU: 2, Qty: 1}}})
			base, err := ordertest.SnapshotForeign(ctx, db)
			require.NoError(t, err)
			for _, q := range tc.breakSQL {
				_, err := db.ExecContext(ctx, q)
				require.NoError(t, err, q)
			}
			err = ordertest.CheckForeign(ctx, db, base, ordertest.LockedOnly)
			if tc.rule == "" {
				require.NoError(t, err)
				return
			}
			require.Contains(t, rules(t, err), tc.rule)
		})
	}
}
