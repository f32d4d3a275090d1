package orders_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// The close runs the payment step for every locked, due order before its
// transaction: "closed" and "not_found" close it, "already_paid" skips it
// (counted), errors leave it for the next pass (counted). Calls run at most
// TradeFanOut at once.
func TestTradeStepOutcomes(t *testing.T) {
	t.Parallel()
	p := ordertest.NewPaySide(t, "s3cret")
	http := paytest.TradeCloser(t, p, 2)
	var inFlight, maxFlight atomic.Int64 // as the closer sees them
	counting := tradeFunc(func(ctx context.Context, no string) (orders.TradeResult, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxFlight.Load(); n > m && !maxFlight.CompareAndSwap(m, n); m = maxFlight.Load() {
		}
		return http.CloseTrade(ctx, no)
	})
	// A long lock TTL: the payment step gets half of it, and the slow
	// answers below must not run into that budget.
	rec := &recorder{}
	b := setup(t, paytest.WithCloser(orders.CloserConfig{TradeCloser: counting, TradeFanOut: 4, Observer: rec}),
		paytest.WithLocker(orderlock.Config{TTL: time.Minute}))
	res, base := b.Seed(t, orderdemo.Spec{Orders: 280, DueFraction: 1, CouponFraction: 0.5})
	var nos []string
	require.NoError(t, b.DB.SelectContext(b.Ctx, &nos, `SELECT order_no FROM order_info ORDER BY id`))
	answers := []string{"closed", "already_paid", "not_found", "flaky", "fail", "slow", "garbage"}
	want := map[string]int{}
	for i, no := range nos {
		a := answers[i%len(answers)]
		p.Set(no, a)
		want[a]++
	}

	st := b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, res.Due, st.Scanned)
	require.Equal(t, want["closed"]+want["not_found"]+want["flaky"], st.Closed)
	require.Equal(t, want["already_paid"], st.SkippedPaid)
	require.Equal(t, want["already_paid"], st.TradePaid)
	failed := want["fail"] + want["slow"] + want["garbage"]
	require.Equal(t, failed, st.SkippedLocked)
	require.Equal(t, failed, st.TradeErrors)
	require.Error(t, st.TradeErr)
	// The metrics hook is told the same, page by page.
	seen := rec.sum()
	require.Equal(t, failed, seen.TradeErrors)
	require.Equal(t, want["already_paid"], seen.TradePaid)
	require.Zero(t, st.DeadLettered)
	bad, _ := p.Counters()
	require.LessOrEqual(t, maxFlight.Load(), int64(4), "bounded fan-out")
	require.Greater(t, maxFlight.Load(), int64(1), "calls run concurrently")
	require.Zero(t, bad)
	for i, no := range nos {
		switch answers[i%len(answers)] {
		case "fail", "slow":
			require.Equal(t, 3, p.CallsOf(no), "retried twice: %s", no)
		case "flaky":
			require.Equal(t, 2, p.CallsOf(no))
		default:
			require.Equal(t, 1, p.CallsOf(no))
		}
	}
	require.Equal(t, st.Closed, b.Counts(t).Closed)
	b.Check(t, base)

	// The next pass: the payment side works again; the orders it reported
	// paid are asked again (their payment notification has not come yet).
	for i, no := range nos {
		if a := answers[i%len(answers)]; a != "already_paid" {
			p.Set(no, "closed")
		}
	}
	st = b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, failed, st.Closed)
	require.Equal(t, want["already_paid"], st.TradePaid)
	// The notifications arrive: those orders are paid, nothing is left.
	for i, no := range nos {
		if answers[i%len(answers)] == "already_paid" {
			out, err := b.Svc.Pay(b.Ctx, no)
			require.NoError(t, err)
			require.Equal(t, payment.Paid, out)
		}
	}
	st = b.run(t, orders.RunOptions{})
	require.Zero(t, st.Scanned)
	c := b.Counts(t)
	require.Equal(t, want["already_paid"], c.Paid)
	require.Equal(t, res.Due-want["already_paid"], c.Closed)
	require.Zero(t, b.RedisKeys(t), "every lock released")
	b.Check(t, base)
}

// Only orders this run holds the lock of, and that are still unpaid and due
// under it, reach the payment side.
func TestTradeStepOnlyLockedDueOrders(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	tc := tradeFunc(func(ctx context.Context, no string) (orders.TradeResult, error) {
		calls.Add(1)
		return orders.TradeClosed, nil
	})
	b := setup(t, paytest.WithCloser(orders.CloserConfig{TradeCloser: tc}))
	b.Shop(t)
	for _, no := range []string{"L1", "L2", "L3"} {
		b.Place(t, no, true, payment.Item{SKUID: 1, Quantity: 1})
	}
	base := b.Snapshot(t)
	m := b.Locker.Redsync().NewMutex(b.Locker.KeyFor("L2"))
	require.NoError(t, m.LockContext(b.Ctx))

	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "nothing due yet")
	require.Zero(t, calls.Load())

	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{TradeCloser: tc})
	st, err = late.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, st.Closed)
	require.Equal(t, 1, st.SkippedLocked)
	require.Equal(t, int64(2), calls.Load(), "no call for the order locked elsewhere")
	_, err = m.UnlockContext(b.Ctx)
	require.NoError(t, err)
	b.Check(t, base)
}

// CloseOrder runs the same step: the delayed-task path.
func TestTradeStepCloseOrder(t *testing.T) {
	t.Parallel()
	p := ordertest.NewPaySide(t, "tok")
	b := setup(t)
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{TradeCloser: paytest.TradeCloser(t, p, 0)})
	b.Shop(t)
	for _, no := range []string{"O1", "O2", "O3"} {
		b.Place(t, no, true, payment.Item{SKUID: 2, Quantity: 2})
	}
	base := b.Snapshot(t)
	p.Set("O1", "not_found")
	p.Set("O2", "already_paid")
	p.Set("O3", "fail")

	out, err := late.CloseOrder(b.Ctx, "O1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	out, err = late.CloseOrder(b.Ctx, "O2")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedPaid, out)
	out, err = late.CloseOrder(b.Ctx, "O3")
	require.ErrorContains(t, err, "status 500")
	require.Equal(t, orders.OutcomeSkippedLocked, out)
	c := b.Counts(t)
	require.Equal(t, 1, c.Closed)
	require.Equal(t, 2, c.Unpaid)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`), "a payment-side failure is not a dead letter")

	out, err = late.CloseOrder(b.Ctx, "O1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedClosed, out)
	require.Equal(t, 1, p.CallsOf("O1"), "no call for an order already closed")
	b.Check(t, base)
}

// A TradeCloser that panics or answers outside the contract leaves the
// order open; NopTradeCloser is the same as none.
func TestTradeStepMisbehaving(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "M1", false, payment.Item{SKUID: 3, Quantity: 1})
	base := b.Snapshot(t)
	for _, tc := range []orders.TradeCloser{
		tradeFunc(func(context.Context, string) (orders.TradeResult, error) { panic("payment SDK bug") }),
		tradeFunc(func(context.Context, string) (orders.TradeResult, error) { return 42, nil }),
	} {
		c := b.shiftedCloser(t, time.Hour, orders.CloserConfig{TradeCloser: tc})
		st, err := c.Run(b.Ctx, orders.RunOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, st.TradeErrors)
		require.Zero(t, st.Closed)
	}
	c := b.shiftedCloser(t, time.Hour, orders.CloserConfig{TradeCloser: orders.NopTradeCloser{}})
	st, err := c.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	b.Check(t, base)
}

type tradeFunc func(ctx context.Context, orderNo string) (orders.TradeResult, error)

func (f tradeFunc) CloseTrade(ctx context.Context, orderNo string) (orders.TradeResult, error) {
	return f(ctx, orderNo)
}

// The payment step may use half of the lock TTL: calls still running then
// are cancelled and their orders left to the next pass, so the close
// transaction always has the other half.
func TestTradeStepBudget(t *testing.T) {
	t.Parallel()
	hang := tradeFunc(func(ctx context.Context, _ string) (orders.TradeResult, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	b := setup(t, paytest.WithCloser(orders.CloserConfig{TradeCloser: hang}), paytest.WithLocker(orderlock.Config{TTL: time.Second}))
	_, base := b.Seed(t, orderdemo.Spec{Orders: 30, DueFraction: 1})
	start := time.Now()
	st := b.run(t, orders.RunOptions{})
	require.Less(t, time.Since(start), 900*time.Millisecond, "within half the TTL, plus the rest")
	require.Equal(t, 30, st.TradeErrors)
	require.ErrorIs(t, st.TradeErr, context.DeadlineExceeded)
	require.Zero(t, st.Closed)
	require.Zero(t, b.RedisKeys(t))
	b.Check(t, base)
}
