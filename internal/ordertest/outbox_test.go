package ordertest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// closeOutbox closes the seeded data's due orders in outbox mode.
// It returns a function listing the rules CheckOutbox (Delivered) finds
// broken, and one running a statement.
func closeOutbox(t *testing.T) (check func() []string, exec func(query string)) {
	t.Helper()
	ctx := context.Background()
	db, base := seed(t)
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{Compensation: orders.CompensateOutbox})
	require.NoError(t, err)
	st, err := closer.Run(ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Positive(t, st.Closed)
	check = func() []string {
		err := ordertest.CheckOutbox(ctx, db, base, ordertest.OutboxOptions{Delivered: true})
		if err == nil {
			return nil
		}
		return rules(t, err)
	}
	exec = func(query string) {
		_, err := db.ExecContext(ctx, query)
		require.NoError(t, err)
	}
	return check, exec
}

func TestCheckOutbox(t *testing.T) {
	t.Parallel()
	check, exec := closeOutbox(t)
	require.Equal(t, []string{"outbox_undelivered"}, check(), "all else holds; nothing delivered yet")
	exec(`UPDATE order_outbox SET status = 'done', delivered_at = UTC_TIMESTAMP(3)`)
	require.Empty(t, check())
}

func TestCheckOutboxCatchesEachRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rule     string
		breakSQL string
	}{
		{"outbox_stock_missing", `DELETE FROM order_outbox WHERE event_type = 'stock.release' LIMIT 1`},
		{"outbox_coupon_missing", `DELETE FROM order_outbox WHERE event_type = 'coupon.restore' LIMIT 1`},
		{"outbox_not_closed", `UPDATE order_info SET status = 0 WHERE status = 2 AND coupon_id IS NULL LIMIT 1`},
		{"outbox_payload", `UPDATE order_outbox SET payload = REPLACE(payload, '"quantity":1', '"quantity":9') WHERE event_type = 'stock.release'`},
		{"outbox_stock_locked", `UPDATE inventory SET locked = locked - 1, available = available + 1 WHERE locked > 0 LIMIT 1`},
		{"outbox_closed_coupon_changed", `UPDATE user_coupon c JOIN order_info o ON o.coupon_id = c.id SET c.status = 0, c.order_no = NULL WHERE o.status = 2`},
		{"coupon_locked_not_open", `UPDATE user_coupon SET status = 1 WHERE status = 2 LIMIT 1`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			check, exec := closeOutbox(t)
			exec(`UPDATE order_outbox SET status = 'done', delivered_at = UTC_TIMESTAMP(3)`)
			exec(tc.breakSQL)
			require.Contains(t, check(), tc.rule)
		})
	}
}

func TestCheckPayments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := seed(t)
	require.NoError(t, ordertest.CheckPayments(ctx, db))
	_, err := db.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at)
		SELECT CONCAT('legacy:', order_no), order_no, 1.00, NOW(3) FROM order_info WHERE status = 1 AND pay_amount <> 1.00 LIMIT 1`)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"conflict_not_closed", "conflict_amount"}, rules(t, ordertest.CheckPayments(ctx, db)))
	_, err = db.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, reason, paid_at)
		SELECT 'wx-dup', order_no, 1.00, 'duplicate', NOW(3) FROM order_info WHERE status = 0 LIMIT 1`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO order_payment (payment_id, order_no, amount, paid_at)
		SELECT 'wx-paid', order_no, 1.00, NOW(3) FROM order_info WHERE status = 0 ORDER BY id DESC LIMIT 1`)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"conflict_not_closed", "conflict_amount", "conflict_duplicate_not_paid", "payment_not_paid"},
		rules(t, ordertest.CheckPayments(ctx, db)))
}
