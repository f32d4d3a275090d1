package orders_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
)

// holdOrderRow locks an order's row in a transaction of its own (as a slow
// statement of another tool would) until the test ends or release is
// called.
func (b *testBundle) holdOrderRow(t *testing.T, no string) (release func()) {
	t.Helper()
	tx, err := b.db.BeginTxx(b.ctx, nil)
	require.NoError(t, err)
	var id int64
	require.NoError(t, tx.GetContext(b.ctx, &id, `SELECT id FROM order_info WHERE order_no = ? FOR UPDATE`, no))
	release = func() { _ = tx.Rollback() }
	t.Cleanup(release)
	return release
}

// A close whose caller gives up (a delayed task's handler timeout) stops
// within CancelBound of the cancellation, even when a statement of its page
// waits on a row lock: nothing can commit once its lease is over, so the
// page ends there and the order is left for later (skipped, lease lost).
func TestCloseStopsWithinCancelBound(t *testing.T) {
	t.Parallel()
	b := setup(t, withLocker(orders.LockerConfig{TTL: time.Second}))
	late := b.newCloser(t, orders.CloserConfig{NowOffset: 31 * time.Minute})
	b.shop(t)
	b.place(t, "HELD-1", false, orders.Item{SKUID: 1, Quantity: 1})
	b.place(t, "HELD-2", false, orders.Item{SKUID: 1, Quantity: 1})
	b.holdOrderRow(t, "HELD-1")
	b.holdOrderRow(t, "HELD-2")
	bound := late.CancelBound()
	require.Equal(t, time.Second+400*time.Millisecond+3*time.Second, bound)

	cancelled := func() (context.Context, chan time.Time) {
		ctx, cancel := context.WithCancel(b.ctx)
		at := make(chan time.Time, 1)
		time.AfterFunc(300*time.Millisecond, func() { at <- time.Now(); cancel() })
		t.Cleanup(cancel)
		return ctx, at
	}
	ctx, at := cancelled()
	outs, err := late.CloseOrders(ctx, []string{"HELD-1"})
	after := time.Since(<-at)
	require.NoError(t, err)
	require.Less(t, after, bound, "CloseOrders went on %s after its cancellation", after)
	require.Equal(t, orders.OutcomeSkippedLocked, outs[0].Outcome)
	require.ErrorIs(t, outs[0].Err, orders.ErrLeaseExpired)

	ctx, at = cancelled()
	out, err := late.CloseOrder(ctx, "HELD-2")
	after = time.Since(<-at)
	require.NoError(t, err)
	require.Less(t, after, bound, "CloseOrder went on %s after its cancellation", after)
	require.Equal(t, orders.OutcomeSkippedLocked, out)
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM order_info WHERE status = 2`), "nothing closed")
	require.Zero(t, b.redisKeys(t), "locks released")
}
