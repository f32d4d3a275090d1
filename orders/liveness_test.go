package orders_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// holdOrderRow locks an order's row in a transaction of its own (as a slow
// statement of another tool would) until the test ends or release is
// called.
func (b *testBundle) holdOrderRow(t *testing.T, no string) (release func()) {
	t.Helper()
	tx, err := b.DB.BeginTxx(b.Ctx, nil)
	require.NoError(t, err)
	var id int64
	require.NoError(t, tx.GetContext(b.Ctx, &id, `SELECT id FROM order_info WHERE order_no = ? FOR UPDATE`, no))
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
	b := setup(t, paytest.WithLocker(orderlock.Config{TTL: time.Second}))
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{})
	b.Shop(t)
	b.Place(t, "HELD-1", false, payment.Item{SKUID: 1, Quantity: 1})
	b.Place(t, "HELD-2", false, payment.Item{SKUID: 1, Quantity: 1})
	b.holdOrderRow(t, "HELD-1")
	b.holdOrderRow(t, "HELD-2")
	bound := late.CancelBound()
	require.Equal(t, time.Second+400*time.Millisecond+3*time.Second, bound)

	cancelled := func() (context.Context, chan time.Time) {
		ctx, cancel := context.WithCancel(b.Ctx)
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
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 2`), "nothing closed")
	require.Zero(t, b.RedisKeys(t), "locks released")
}

// Slow payment-side calls spend the lease of the page being closed, never
// that of the next one: pages are locked when their close begins, so none
// loses its turn to a lease aged while the page before it ran.
func TestSlowPaymentSideLosesNoPage(t *testing.T) {
	t.Parallel()
	slow := tradeFunc(func(ctx context.Context, _ string) (orders.TradeResult, error) {
		select {
		case <-time.After(350 * time.Millisecond):
			return orders.TradeClosed, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	b := setup(t, paytest.WithCloser(orders.CloserConfig{TradeCloser: slow, TradeFanOut: 1}), paytest.WithLocker(orderlock.Config{TTL: 2 * time.Second}))
	_, base := b.Seed(t, orderdemo.Spec{Orders: 12, DueFraction: 1})
	st := b.run(t, orders.RunOptions{PageSize: 2})
	require.Equal(t, 12, st.Closed, "%s (trade errors %d: %v)", st, st.TradeErrors, st.TradeErr)
	require.Zero(t, st.TradeErrors)
	b.Check(t, base)
}

// A low maxPerSecond makes the pacer wait between pages longer than the
// lock TTL; the page is locked after the wait, so it still closes.
func TestRateCapLosesNoPage(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithLocker(orderlock.Config{TTL: time.Second}))
	_, base := b.Seed(t, orderdemo.Spec{Orders: 3, DueFraction: 1})
	st := b.run(t, orders.RunOptions{MaxPerSecond: 0.8})
	require.Equal(t, 3, st.Closed, "%s (lease lost %d)", st, st.LeaseLost)
	require.Zero(t, st.LeaseLost)
	b.Check(t, base)
}

// maxOrders counts the orders a run handles, skipped or closed; with orders
// that never close at the head (their locks held elsewhere), capped runs
// still reach the newer due orders, and come back to the head.
func TestMaxOrdersReachesPastStuckOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{})
	b.Shop(t)
	var stuck, newer []string
	for i := range 4 {
		stuck = append(stuck, fmt.Sprintf("STUCK-%d", i))
		b.Place(t, stuck[i], false, payment.Item{SKUID: 1, Quantity: 1})
	}
	// One second later by create_time, so they sort after the stuck ones.
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET create_time = create_time - INTERVAL 1 SECOND`)
	require.NoError(t, err)
	for i := range 6 {
		newer = append(newer, fmt.Sprintf("NEWER-%d", i))
		b.Place(t, newer[i], false, payment.Item{SKUID: 2, Quantity: 1})
	}
	other, err := orderlock.New(orderlock.Config{Client: b.RDB, Prefix: b.Prefix, TTL: time.Minute})
	require.NoError(t, err)
	held, err := other.Acquire(b.Ctx, stuck)
	require.NoError(t, err)
	require.Equal(t, 4, held.Len())

	closedNewer := func() int {
		return b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 2 AND order_no LIKE 'NEWER-%'`)
	}
	var runs []orders.RunStats
	for len(runs) < 3 && closedNewer() < len(newer) {
		st, err := late.Run(b.Ctx, orders.RunOptions{MaxOrders: 4, PageSize: 3})
		require.NoError(t, err)
		require.LessOrEqual(t, st.Scanned, 4, "the cap counts skips too")
		runs = append(runs, st)
	}
	require.Equal(t, len(newer), closedNewer(), "runs: %v", runs)
	require.Equal(t, 4, runs[0].SkippedLocked, "the first capped run meets the stuck head")

	// Once free, the stuck orders close: the runs come back to the head.
	require.NoError(t, held.Release(b.Ctx))
	for range 3 {
		_, err := late.Run(b.Ctx, orders.RunOptions{MaxOrders: 4, PageSize: 3})
		require.NoError(t, err)
	}
	require.Equal(t, 10, b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 2`))
}
