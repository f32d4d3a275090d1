package handlers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// These tests run the real order close (orders.Closer.CloseOrder) behind
// orderTimeoutClose, on orders placed and paid through payment.Service.

type orderWorld struct {
	db     *sqlx.DB
	svc    *payment.Service
	closer *orders.Closer
}

// newOrderWorld builds the order service and a closer; orders placed
// through it with a 1-minute timeout are due at once (place: moved two
// minutes back) or in a minute (placeEarly).
func newOrderWorld(t *testing.T, b *testBundle, db *sqlx.DB) *orderWorld {
	t.Helper()
	locker, err := orderlock.New(orderlock.Config{Client: b.rdb, Prefix: b.prefix})
	require.NoError(t, err)
	svc, err := payment.NewService(db, locker, payment.ServiceConfig{})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db, locker, orders.CloserConfig{})
	require.NoError(t, err)
	require.NoError(t, svc.AddStock(context.Background(), 1, 100))
	return &orderWorld{db: db, svc: svc, closer: closer}
}

// place places order no, due at once.
func (w *orderWorld) place(t *testing.T, no string) {
	t.Helper()
	w.placeEarly(t, no)
	placedAgo(t, w.db, no, 2*time.Minute)
}

// placeEarly places order no, due in a minute.
func (w *orderWorld) placeEarly(t *testing.T, no string) {
	t.Helper()
	_, err := w.svc.PlaceOrder(context.Background(), payment.NewOrder{OrderNo: no, UserID: 7,
		Items: []payment.Item{{SKUID: 1, Quantity: 2}}, TimeoutMinutes: 1})
	require.NoError(t, err)
}

// placedAgo moves order no's creation back by d, as if it had been placed
// that long ago.
func placedAgo(t *testing.T, db *sqlx.DB, no string, d time.Duration) {
	t.Helper()
	_, err := db.Exec(`UPDATE order_info SET create_time = create_time - INTERVAL ? MICROSECOND WHERE order_no = ?`,
		d.Microseconds(), no)
	require.NoError(t, err)
}

func (b *testBundle) orderStatus(t *testing.T, no string) (status, closeLogs int) {
	t.Helper()
	require.NoError(t, b.db.Get(&status, `SELECT status FROM order_info WHERE order_no = ?`, no))
	require.NoError(t, b.db.Get(&closeLogs, `SELECT COUNT(*) FROM order_close_log WHERE order_no = ?`, no))
	return status, closeLogs
}

func TestDelayOrderCloseClosesAndSkipsPaidOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newOrderWorld(t, b, b.db.DB)
	d := newDispatcher(t, b.fastConfig(map[string]delay.HandlerFunc{
		delay.OrderTimeoutCloseHandler: DelayOrderClose(w.closer.CloseOrder),
	}))
	start(t, d)
	ctx := context.Background()
	w.place(t, "REAL-1")
	w.place(t, "REAL-PAID")
	for _, no := range []string{"REAL-1", "REAL-PAID"} {
		_, _, err := d.Client().Register(ctx, delay.OrderTimeoutClose(no, time.Now().Add(300*time.Millisecond)))
		require.NoError(t, err)
	}
	// Paid before its task fires.
	out, err := w.svc.Pay(ctx, "REAL-PAID")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)

	b.waitStatus(t, "order-timeout-REAL-1", delay.StatusDone)
	b.waitStatus(t, "order-timeout-REAL-PAID", delay.StatusDone)
	st, logs := b.orderStatus(t, "REAL-1")
	require.Equal(t, 2, st, "closed")
	require.Equal(t, 1, logs)
	st, logs = b.orderStatus(t, "REAL-PAID")
	require.Equal(t, 1, st, "still paid: the close was a no-op")
	require.Zero(t, logs)
	waitCounters(t, d, func(c delay.Counters) bool { return c.Outcomes["closed"] == 1 && c.Outcomes["skipped_paid"] == 1 })
	var stock struct {
		Available int64 `db:"available"`
		Locked    int64 `db:"locked"`
	}
	require.NoError(t, b.db.Get(&stock, `SELECT available, locked FROM inventory WHERE sku_id = 1`))
	require.Equal(t, struct {
		Available int64 `db:"available"`
		Locked    int64 `db:"locked"`
	}{98, 0}, stock, "REAL-1's 2 units back, REAL-PAID's 2 consumed")
}

// The dispatcher dies after the order was closed but before the task's
// result was recorded; after the RUNNING limit another dispatcher runs the
// task again and the order-close CAS makes that a no-op.
func TestDelayOrderCloseKilledDispatcherClosesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dying := delaytest.NewDying(t, b.db.DSN)
	wA := newOrderWorld(t, b, dying.DB)
	w := newOrderWorld(t, b, b.db.DB)
	w.place(t, "KILL-1")
	cfgA := b.fastConfig(map[string]delay.HandlerFunc{delay.OrderTimeoutCloseHandler: func(ctx context.Context, tk *delay.Task) error {
		err := DelayOrderClose(wA.closer.CloseOrder)(ctx, tk)
		dying.Die() // dies before the result is written
		return err
	}})
	cfgA.db = dying.DB
	a := newDispatcher(t, cfgA)
	require.NoError(t, a.Start(context.Background()))
	ctx := context.Background()
	_, _, err := a.Client().Register(ctx, delay.OrderTimeoutClose("KILL-1", time.Now()))
	require.NoError(t, err)
	dying.Stop(t, a)
	require.Equal(t, delay.StatusRunning, b.task(t, "order-timeout-KILL-1").Status)
	st, logs := b.orderStatus(t, "KILL-1")
	require.Equal(t, 2, st, "the first run closed it")
	require.Equal(t, 1, logs)

	cfgB := b.fastConfig(map[string]delay.HandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderClose(w.closer.CloseOrder)})
	cfgB.RunningTimeout, cfgB.HandlerTimeout = delaytest.RecoveryRunningTimeout, delaytest.RecoveryHandlerTimeout
	bd := newDispatcher(t, cfgB)
	b.ageTask(t, "order-timeout-KILL-1", delaytest.PastRunningTimeout)
	start(t, bd)
	tk := b.waitStatus(t, "order-timeout-KILL-1", delay.StatusDone)
	require.Equal(t, 1, tk.RetryCount)
	waitCounters(t, bd, func(c delay.Counters) bool { return c.Outcomes["skipped_closed"] == 1 })
	st, logs = b.orderStatus(t, "KILL-1")
	require.Equal(t, 2, st)
	require.Equal(t, 1, logs, "closed once")
}

// A task that fires before its order's deadline does not close it and
// spends no retry: the batch handler (the executor's) moves it to the
// order's real deadline, read from the order.
func TestOrderCloseNotDueMovesToDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newOrderWorld(t, b, b.db.DB)
	strict, err := orders.NewCloser(b.db.DB, mustLocker(t, b), orders.CloserConfig{}) // the real clock
	require.NoError(t, err)
	cfg := b.fastConfig(nil)
	cfg.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderCloseBatch(strict.CloseOrders)}
	d := newDispatcher(t, cfg)
	start(t, d)
	w.placeEarly(t, "EARLY-1")
	r := delay.OrderTimeoutClose("EARLY-1", time.Now())
	r.MaxRetry = 1
	tk, _, err := d.Client().Register(context.Background(), r)
	require.NoError(t, err)
	waitCounters(t, d, func(c delay.Counters) bool { return c.NotDue == 1 })
	got := b.task(t, "order-timeout-EARLY-1")
	require.Equal(t, delay.StatusPending, got.Status)
	require.Zero(t, got.RetryCount, "no retry spent")
	require.Contains(t, got.LastError, "not due yet")
	moved := got.NextAttemptTime.Sub(tk.ExecuteTime)
	require.InDelta(t, time.Minute.Seconds(), moved.Seconds(), 3, "moved to the order's deadline: %s", moved)
	require.Equal(t, got.NextAttemptTime, got.ExecuteTime)
	st, _ := b.orderStatus(t, "EARLY-1")
	require.Zero(t, st, "still unpaid and open")
}

// Through CloseOrder, whose outcome does not tell the deadline, a task that
// fires early is "not now": rescheduled after the not-now backoff, no retry
// spent.
func TestOrderCloseNotDueSingleIsNotNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newOrderWorld(t, b, b.db.DB)
	strict, err := orders.NewCloser(b.db.DB, mustLocker(t, b), orders.CloserConfig{})
	require.NoError(t, err)
	cfg := b.fastConfig(map[string]delay.HandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderClose(strict.CloseOrder)})
	cfg.NotNowBackoff, cfg.NotNowBackoffMax = 200*time.Millisecond, 400*time.Millisecond
	d := newDispatcher(t, cfg)
	start(t, d)
	w.placeEarly(t, "EARLY-2")
	r := delay.OrderTimeoutClose("EARLY-2", time.Now())
	r.MaxRetry = 1
	_, _, err = d.Client().Register(context.Background(), r)
	require.NoError(t, err)
	waitCounters(t, d, func(c delay.Counters) bool { return c.NotNow >= 3 })
	got := b.task(t, "order-timeout-EARLY-2")
	require.NotEqual(t, delay.StatusFailed, got.Status)
	require.Zero(t, got.RetryCount, "no retry spent")
	require.Contains(t, got.LastError, "not due yet")
}

func mustLocker(t *testing.T, b *testBundle) *orderlock.Locker {
	t.Helper()
	l, err := orderlock.New(orderlock.Config{Client: b.rdb, Prefix: b.prefix})
	require.NoError(t, err)
	return l
}

// Outcome names are what the dispatcher counts successful closes by
// (Counters.Outcomes) and what the metrics and dashboards read.
func TestOrderOutcomeNamesMatch(t *testing.T) {
	t.Parallel()
	for o, want := range map[orders.Outcome]string{
		orders.OutcomeClosed: "closed", orders.OutcomeNotDue: "not_due", orders.OutcomeSkippedPaid: "skipped_paid",
		orders.OutcomeSkippedClosed: "skipped_closed", orders.OutcomeSkippedLocked: "skipped_locked",
		orders.OutcomeDeadLettered: "dead_lettered", orders.OutcomeNotFound: "not_found", orders.OutcomeParked: "parked",
	} {
		require.Equal(t, want, o.String(), fmt.Sprint(int(o)))
	}
}

// With Redis down, the order's lock cannot be taken: each sweep pass is
// "not now", which spends no retry, however many passes come; once Redis is
// back, the task closes its order.
func TestRedisDownSweepsSpendNoRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: b.prefix})
	require.NoError(t, err)
	svc, err := payment.NewService(b.db.DB, locker, payment.ServiceConfig{})
	require.NoError(t, err)
	closer, err := orders.NewCloser(b.db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, svc.AddStock(ctx, 1, 10))
	_, err = svc.PlaceOrder(ctx, payment.NewOrder{OrderNo: "DOWN-1", UserID: 1, Items: []payment.Item{{SKUID: 1, Quantity: 1}}, TimeoutMinutes: 1})
	require.NoError(t, err)
	placedAgo(t, b.db.DB, "DOWN-1", 2*time.Minute)

	cfg := b.fastConfig(nil)
	cfg.rdb = rdb
	cfg.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderCloseBatch(closer.CloseOrders)}
	cfg.NotNowBackoff, cfg.NotNowBackoffMax = 20*time.Millisecond, 40*time.Millisecond
	d := newDispatcher(t, cfg) // not started: only the sweep runs tasks here
	_, _, err = d.Client().Register(ctx, delay.OrderTimeoutClose("DOWN-1", time.Now()))
	require.NoError(t, err)
	srv.Stop()

	passes := 0
	for deadline := time.Now().Add(waitLong); passes < 4; {
		require.True(t, time.Now().Before(deadline), "only %d sweep passes found the task", passes)
		res, err := d.Sweep(ctx, delay.SweepOptions{})
		require.NoError(t, err)
		if res.Found == 0 {
			time.Sleep(10 * time.Millisecond) // rescheduled a moment ahead
			continue
		}
		passes++
		require.Equal(t, 1, res.NotNow, "pass %d: %s", passes, res)
		require.Zero(t, res.Retried+res.Failed, "pass %d: %s", passes, res)
	}
	tk := b.task(t, "order-timeout-DOWN-1")
	require.Equal(t, delay.StatusPending, tk.Status)
	require.Zero(t, tk.RetryCount, "no retry spent on the outage")
	require.Contains(t, tk.LastError, "not now")
	st, _ := b.orderStatus(t, "DOWN-1")
	require.Zero(t, st, "still open")

	srv.Start()
	require.Eventually(t, func() bool {
		res, err := d.Sweep(ctx, delay.SweepOptions{})
		require.NoError(t, err)
		return res.Done == 1
	}, waitLong, 20*time.Millisecond)
	tk = b.task(t, "order-timeout-DOWN-1")
	require.Equal(t, delay.StatusDone, tk.Status)
	require.Zero(t, tk.RetryCount)
	st, logs := b.orderStatus(t, "DOWN-1")
	require.Equal(t, 2, st, "closed once Redis is back")
	require.Equal(t, 1, logs)
}
