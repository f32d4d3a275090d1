package ordertest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
)

func seed(t *testing.T) (*dbtest.DB, *ordertest.Baseline) {
	t.Helper()
	db := dbtest.New(t)
	_, err := orderdemo.Generate(context.Background(), db.DB, orderdemo.Spec{Orders: 2000, SKUs: 100, CouponFraction: 0.5})
	require.NoError(t, err)
	base, err := ordertest.Snapshot(context.Background(), db)
	require.NoError(t, err)
	return db, base
}

func rules(t *testing.T, err error) []string {
	t.Helper()
	var ve *ordertest.ViolationsError
	require.True(t, errors.As(err, &ve), "want violations, got %v", err)
	return ve.Rules()
}

func TestCheckHoldsOnFreshData(t *testing.T) {
	t.Parallel()
	db, base := seed(t)
	require.NoError(t, ordertest.Check(context.Background(), db, base))
	c, err := ordertest.Counts(context.Background(), db)
	require.NoError(t, err)
	require.Equal(t, 2000, c.Unpaid+c.Paid+c.Closed)
	require.Positive(t, c.Due)
}

// The naive close (one UPDATE of the status) breaks the invariants: no log,
// stock still locked, coupons still held.
func TestCheckCatchesNaiveClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, base := seed(t)
	_, err := db.ExecContext(ctx, `UPDATE order_info SET status = 2 WHERE status = 0 AND create_time < NOW() - INTERVAL 30 MINUTE`)
	require.NoError(t, err)
	got := rules(t, ordertest.Check(ctx, db, base))
	require.Subset(t, got, []string{"closed_without_log", "closed_without_time", "closed_coupon_held", "coupon_locked_not_unpaid", "stock_locked"})
	require.NotContains(t, got, "stock_total", "closing moves no stock in or out")
}

func TestCheckCatchesEachRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		rule     string
		breakSQL string
	}{
		{"stock_total", `UPDATE inventory SET available = available + 1 WHERE sku_id = 3`},
		{"stock_missing", `DELETE FROM inventory WHERE sku_id = 3`},
		{"paid_changed", `UPDATE order_info SET status = 0 WHERE status = 1 LIMIT 1`},
		{"close_log_not_closed", `INSERT INTO order_close_log (order_no, closed_at, reason) SELECT order_no, NOW(), 'x' FROM order_info WHERE status = 0 LIMIT 1`},
		{"coupon_used_not_paid", `UPDATE user_coupon SET status = 2 WHERE status = 1 LIMIT 1`},
		{"paid_coupon_not_used", `UPDATE user_coupon SET order_no = NULL WHERE status = 2 LIMIT 1`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			db, base := seed(t)
			_, err := db.ExecContext(ctx, tc.breakSQL)
			require.NoError(t, err)
			require.Contains(t, rules(t, ordertest.Check(ctx, db, base)), tc.rule)
		})
	}
}
