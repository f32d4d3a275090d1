package orders_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// recorder is an Observer that keeps everything it is told. Pages come from
// the run's goroutine, lock reports from the scanner's: it locks.
type recorder struct {
	mu       sync.Mutex
	pages    []orders.PageReport
	lateness []time.Duration
	locks    []orderlock.Report
}

func (r *recorder) ClosePage(_ context.Context, p orders.PageReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pages = append(r.pages, p)
}

func (r *recorder) OrdersClosed(_ context.Context, late []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lateness = append(r.lateness, late...)
}

func (r *recorder) LocksAcquired(_ context.Context, l orderlock.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.locks = append(r.locks, l)
}

func (r *recorder) sum() (s orders.PageReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pages {
		s.Scanned += p.Scanned
		s.Closed += p.Closed
		s.DeadLettered += p.DeadLettered
		s.SkippedPaid += p.SkippedPaid
		s.SkippedLocked += p.SkippedLocked
		s.SkippedClosed += p.SkippedClosed
		s.SkippedNotDue += p.SkippedNotDue
		s.SkippedParked += p.SkippedParked
		s.LockErrors += p.LockErrors
		s.LeaseLost += p.LeaseLost
		s.TradePaid += p.TradePaid
		s.TradeErrors += p.TradeErrors
	}
	return s
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pages, r.lateness, r.locks = nil, nil, nil
}

// The observer is told, page by page, exactly what Run reports in its stats:
// closes, dead letters and lock contention, plus one lateness per closed
// order; and the overdue and dead-letter gauges read what is left.
func TestObserverSeesWhatRunDid(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Observer: rec}), paytest.WithLocker(orderlock.Config{Observer: rec}))
	// Due orders over several pages: four fail on SKU 7, which has no stock
	// row, and one other is locked by someone else; paid and not-due orders
	// beside them.
	due := numbered("D", 12, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i%3 == 0, Items: []ordertest.Item{{SKU: int64(1 + i%4), Qty: 1}}}
	})
	const victims = 4
	poisoned := numbered("X", victims, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Items: []ordertest.Item{{SKU: 7, Qty: 1, MissingStock: true}, {SKU: 1, Qty: 2}}}
	})
	paidOrders := numbered("P", 2, func(int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Status: 1, Items: []ordertest.Item{{SKU: 2, Qty: 1}}}
	})
	notDue := numbered("N", 3, func(int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Items: []ordertest.Item{{SKU: 3, Qty: 1}}}
	})
	b.build(t, slices.Concat(due, poisoned, paidOrders, notDue)...)

	n, oldest, err := b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, len(due)+victims, n, "every due order is overdue before the run")
	require.Positive(t, oldest)

	const held = "D-5"
	mu := b.Locker.Redsync().NewMutex(b.Locker.KeyFor(held))
	require.NoError(t, mu.LockContext(b.Ctx))
	defer func() { _, _ = mu.UnlockContext(context.WithoutCancel(b.Ctx)) }() // unlocked below unless the test fails first

	st := b.run(t, orders.RunOptions{PageSize: 5, ShardTotal: 1})
	require.Equal(t, victims, st.DeadLettered)
	require.Equal(t, 1, st.SkippedLocked)

	got := rec.sum()
	require.Equal(t, orders.PageReport{
		Scanned: st.Scanned, Closed: st.Closed, DeadLettered: st.DeadLettered,
		SkippedPaid: st.SkippedPaid, SkippedLocked: st.SkippedLocked, SkippedClosed: st.SkippedClosed,
		SkippedNotDue: st.SkippedNotDue, LockErrors: st.LockErrors, LeaseLost: st.LeaseLost,
	}, got)
	rec.mu.Lock()
	require.Len(t, rec.pages, st.Pages)
	for _, p := range rec.pages {
		require.Equal(t, p.Scanned, p.Closed+p.DeadLettered+p.SkippedPaid+p.SkippedLocked+p.SkippedClosed+p.SkippedNotDue)
		require.Equal(t, 1, p.ShardTotal)
		require.False(t, p.Single)
	}
	require.Len(t, rec.lateness, st.Closed, "one lateness per closed order")
	for _, l := range rec.lateness {
		require.Positive(t, l, "due orders are closed after their deadline")
	}
	var keys, heldN, taken int
	for _, l := range rec.locks {
		require.Equal(t, l.Keys, l.Held+l.Taken+l.Failed)
		keys, heldN, taken = keys+l.Keys, heldN+l.Held, taken+l.Taken
	}
	rec.mu.Unlock()
	require.Equal(t, st.Scanned, keys, "every scanned order's lock was asked for once")
	require.Equal(t, 1, taken, "the one order held elsewhere")
	require.Equal(t, st.Scanned-1, heldN)

	// Left overdue: only the locked order (the dead letters wait for their
	// retry time, which the dead-letter gauge reports instead).
	n, oldest, err = b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Positive(t, oldest)
	// A dead letter whose retry time has come no longer holds its order
	// back: the sweep would take it, so it counts as overdue again.
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_dead_letter SET next_retry_at = NOW() - INTERVAL 1 SECOND ORDER BY id LIMIT 1`)
	require.NoError(t, err)
	n, _, err = b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_dead_letter SET next_retry_at = NOW() + INTERVAL 1 HOUR`)
	require.NoError(t, err)
	tallies, err := b.Closer.DeadLetterTallies(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, []orders.DeadLetterTally{{Stage: "close", Status: "waiting", N: victims}}, tallies)

	// CloseOrder reports a page of one.
	rec.reset()
	_, err = mu.UnlockContext(b.Ctx)
	require.NoError(t, err)
	out, err := b.Closer.CloseOrder(b.Ctx, held)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	out, err = b.Closer.CloseOrder(b.Ctx, paidOrders[0].OrderNo)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedPaid, out)
	rec.mu.Lock()
	require.Equal(t, []orders.PageReport{
		{Source: "default", Table: "order_info", ShardTotal: 1, Single: true, Scanned: 1, Closed: 1},
		{Source: "default", Table: "order_info", ShardTotal: 1, Single: true, Scanned: 1, SkippedPaid: 1},
	}, rec.pages)
	require.Len(t, rec.lateness, 1)
	require.Len(t, rec.locks, 1, "a paid order is skipped before its lock is taken")
	rec.mu.Unlock()

	n, oldest, err = b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, oldest)
}

// A dry run reports pages with DryRun set and takes no locks.
func TestObserverDryRun(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Observer: rec}), paytest.WithLocker(orderlock.Config{Observer: rec}))
	due := numbered("D", 7, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i%2 == 0, Items: []ordertest.Item{{SKU: int64(1 + i%3), Qty: 1}}}
	})
	b.build(t, due...)
	st := b.run(t, orders.RunOptions{DryRun: true, ShardIndex: 0, ShardTotal: 1, PageSize: 3})
	require.Equal(t, len(due), st.Closed)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.pages)
	for _, p := range rec.pages {
		require.True(t, p.DryRun)
	}
	require.Empty(t, rec.locks)
	require.Empty(t, rec.lateness)
}
