package handlers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

// The batch handler over the real batch close (orders.Closer.CloseOrders):
// the tasks due together close their orders in shared transactions, paid
// orders are skipped, a task for a missing order FAILS, and the order
// tables' invariants hold. DelayOrderContexts gives the closer each
// order's own task context (its trace id).
func TestOrderCloseBatchRealOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newOrderWorld(t, b, b.db.DB)
	ctx := context.Background()
	const n = 40
	for i := range n {
		w.place(t, bizN("RB", i))
	}
	for i := range 5 {
		out, err := w.svc.Pay(ctx, bizN("RB", i))
		require.NoError(t, err)
		require.Equal(t, payment.Paid, out)
	}
	base, err := ordertest.Snapshot(ctx, b.db)
	require.NoError(t, err)
	cfg := b.fastConfig(nil)
	var mu sync.Mutex
	traces := map[string]string{} // order number → trace id its context carried
	cfg.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderCloseBatch(
		func(ctx context.Context, nos []string) ([]orders.Result, error) {
			of := DelayOrderContexts(ctx)
			mu.Lock()
			for _, no := range nos {
				traces[no] = delay.TraceID(of(no))
			}
			mu.Unlock()
			return w.closer.CloseOrders(orders.WithOrderContexts(ctx, of), nos)
		})}
	d := newDispatcher(t, cfg)
	at := time.Now().Add(500 * time.Millisecond)
	for i := range n {
		_, _, err := d.Client().Register(ctx, delay.OrderTimeoutClose(bizN("RB", i), at))
		require.NoError(t, err)
	}
	_, _, err = d.Client().Register(ctx, delay.OrderTimeoutClose("RB-MISSING", at))
	require.NoError(t, err)
	start(t, d)

	for i := range n {
		tk := b.waitStatus(t, "order-timeout-"+bizN("RB", i), delay.StatusDone)
		mu.Lock()
		require.NotEmpty(t, tk.TraceID)
		require.Equal(t, tk.TraceID, traces[bizN("RB", i)], "the order's context is its task's")
		mu.Unlock()
	}
	tk := b.waitStatus(t, "order-timeout-RB-MISSING", delay.StatusFailed)
	require.Contains(t, tk.LastError, "not found")
	waitCounters(t, d, func(c delay.Counters) bool {
		return c.Outcomes["closed"] == n-5 && c.Outcomes["skipped_paid"] == 5 && c.Failed == 1
	})
	var closed, logs int
	require.NoError(t, b.db.Get(&closed, `SELECT COUNT(*) FROM order_info WHERE status = 2`))
	require.NoError(t, b.db.Get(&logs, `SELECT COUNT(*) FROM order_close_log`))
	require.Equal(t, n-5, closed)
	require.Equal(t, n-5, logs)
	require.NoError(t, ordertest.Check(ctx, b.db, base))
}

// The dispatcher dies after its batch closed the orders but before the
// tasks' results were recorded; after the RUNNING limit another dispatcher
// runs them again, and the batch close's CAS makes that a no-op
// (skipped_closed): each order closed once.
func TestOrderCloseBatchKilledDispatcherClosesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dying := delaytest.NewDying(t, b.db.DSN)
	wA := newOrderWorld(t, b, dying.DB)
	w := newOrderWorld(t, b, b.db.DB)
	nos := []string{"KB-1", "KB-2", "KB-3"}
	for _, no := range nos {
		w.place(t, no)
	}
	cfgA := b.fastConfig(nil)
	cfgA.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: func(ctx context.Context, tasks []*delay.Task) []error {
		errs := DelayOrderCloseBatch(wA.closer.CloseOrders)(ctx, tasks)
		dying.Die() // dies before the results are written
		return errs
	}}
	cfgA.db = dying.DB
	a := newDispatcher(t, cfgA)
	ctx := context.Background()
	at := time.Now().Add(300 * time.Millisecond)
	for _, no := range nos {
		_, _, err := a.Client().Register(ctx, delay.OrderTimeoutClose(no, at))
		require.NoError(t, err)
	}
	require.NoError(t, a.Start(ctx))
	dying.Stop(t, a)
	require.EqualValues(t, 3, a.Counters().Lost)
	for _, no := range nos {
		require.Equal(t, delay.StatusRunning, b.task(t, "order-timeout-"+no).Status)
		st, logs := b.orderStatus(t, no)
		require.Equal(t, 2, st, "the first run closed it")
		require.Equal(t, 1, logs)
	}

	cfgB := b.fastConfig(nil)
	cfgB.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderCloseBatch(w.closer.CloseOrders)}
	cfgB.RunningTimeout, cfgB.HandlerTimeout = delaytest.RecoveryRunningTimeout, delaytest.RecoveryHandlerTimeout
	bd := newDispatcher(t, cfgB)
	for _, no := range nos {
		b.ageTask(t, "order-timeout-"+no, delaytest.PastRunningTimeout)
	}
	start(t, bd)
	for _, no := range nos {
		tk := b.waitStatus(t, "order-timeout-"+no, delay.StatusDone)
		require.Equal(t, 1, tk.RetryCount)
		st, logs := b.orderStatus(t, no)
		require.Equal(t, 2, st)
		require.Equal(t, 1, logs, "closed once")
	}
	waitCounters(t, bd, func(c delay.Counters) bool { return c.Outcomes["skipped_closed"] == 3 && c.Recovered == 3 })
}
