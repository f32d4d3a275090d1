package orders_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// batchObserver keeps the page reports and closed lateness it is told.
type batchObserver struct {
	mu     sync.Mutex
	pages  []orders.PageReport
	closed int
}

func (o *batchObserver) ClosePage(_ context.Context, p orders.PageReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pages = append(o.pages, p)
}

func (o *batchObserver) OrdersClosed(_ context.Context, late []time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed += len(late)
}

func (o *batchObserver) LocksAcquired(context.Context, orderlock.Report) {}

// One batch holding every case CloseOrder knows, in the order given: the
// outcomes are CloseOrder's, one transaction closes the clean orders, the
// poisoned one is dead-lettered without holding the others back, and every
// invariant holds.
func TestCloseOrdersMixedBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	obs := &batchObserver{}
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{Observer: obs})
	b.Shop(t)
	for _, no := range []string{"DUE1", "DUE2", "PAID", "CLOSED", "LOCKED", "PARKED", "WAITING"} {
		b.Place(t, no, true, payment.Item{SKUID: 2, Quantity: 1}, payment.Item{SKUID: 4, Quantity: 2})
	}
	_, err := b.Svc.PlaceOrder(b.Ctx, payment.NewOrder{OrderNo: "NOTDUE", UserID: 7, TimeoutMinutes: 120,
		Items: []payment.Item{{SKUID: 1, Quantity: 1}}})
	require.NoError(t, err)
	// Poisoned: SKU 6 has no stock row.
	ordertest.Order(t, b.DB.DB, ordertest.OrderOpts{OrderNo: "POISON",
		Items: []ordertest.Item{{SKU: 6, Qty: 1, MissingStock: true}, {SKU: 2, Qty: 1}}})
	_, err = b.Svc.Pay(b.Ctx, "PAID")
	require.NoError(t, err)
	out, err := late.CloseOrder(b.Ctx, "CLOSED")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	_, err = b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at)
		VALUES ('PARKED', 'close', 'parked', 'by hand', 5, NOW(3)),
		       ('WAITING', 'close', 'waiting', 'earlier failure', 1, NOW(3) + INTERVAL 1 HOUR)`)
	require.NoError(t, err)
	base := b.Snapshot(t)
	m := b.Locker.Redsync().NewMutex(b.Locker.KeyFor("LOCKED"))
	require.NoError(t, m.LockContext(b.Ctx))

	nos := []string{"DUE1", "NOTDUE", "PAID", "POISON", "CLOSED", "MISSING", "LOCKED", "PARKED", "WAITING", "DUE2", "DUE1"}
	want := []orders.Outcome{orders.OutcomeClosed, orders.OutcomeNotDue, orders.OutcomeSkippedPaid, orders.OutcomeDeadLettered,
		orders.OutcomeSkippedClosed, orders.OutcomeNotFound, orders.OutcomeSkippedLocked, orders.OutcomeParked,
		orders.OutcomeClosed, orders.OutcomeClosed, orders.OutcomeClosed}
	outs, err := late.CloseOrders(b.Ctx, nos)
	require.NoError(t, err)
	require.Equal(t, names(want), names(outs))
	_, err = m.UnlockContext(b.Ctx)
	require.NoError(t, err)
	b.Check(t, base)
	require.Zero(t, b.RedisKeys(t), "every lock released")

	dls := b.deadLetters(t)
	require.Equal(t, "waiting", dls["POISON"].Status)
	require.Equal(t, 1, dls["POISON"].Attempts)
	require.Contains(t, dls["POISON"].LastError, "inventory row of sku 6 is missing")
	require.Equal(t, "resolved", dls["WAITING"].Status, "a waiting letter is retried now, as CloseOrder does")
	require.Equal(t, "parked", dls["PARKED"].Status)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_close_log WHERE order_no = 'DUE1'`), "given twice, closed once")
	require.Equal(t, 4, b.Count(t, `SELECT COUNT(*) FROM order_close_log`), "CLOSED before, DUE1, DUE2, WAITING now")
	c := b.Counts(t)
	require.Equal(t, 4, c.Closed)
	require.Equal(t, 1, c.Paid)
	require.Equal(t, 4, c.Unpaid, "NOTDUE, POISON, LOCKED, PARKED")

	// One report for the batch (duplicates counted once), and one lateness
	// per order closed.
	require.Len(t, obs.pages, 2, "CloseOrder's, then the batch's")
	p := obs.pages[1]
	require.True(t, p.Single)
	require.Equal(t, orders.PageReport{Source: "default", Table: "order_info", ShardTotal: 1, Single: true, Scanned: 10, Closed: 3, DeadLettered: 1, SkippedPaid: 1,
		SkippedLocked: 1, SkippedClosed: 2, SkippedNotDue: 1, SkippedParked: 1}, p)
	require.Equal(t, 4, obs.closed)

	// The same orders again: nothing left to close but the one now free.
	outs, err = late.CloseOrders(b.Ctx, []string{"DUE1", "LOCKED", "POISON"})
	require.NoError(t, err)
	require.Equal(t, names([]orders.Outcome{orders.OutcomeSkippedClosed, orders.OutcomeClosed, orders.OutcomeDeadLettered}), names(outs))
	require.Equal(t, 2, b.deadLetters(t)["POISON"].Attempts, "asked for explicitly: retried although next_retry_at is later")
	b.Check(t, base)

	outs, err = late.CloseOrders(b.Ctx, nil)
	require.NoError(t, err)
	require.Empty(t, outs)
}

func names[O fmt.Stringer](outs []O) []string {
	s := make([]string, len(outs))
	for i, o := range outs {
		s[i] = o.String()
	}
	return s
}

// ctxLog records, for each log line, its message and the ctxTag of the
// context it was logged with.
type ctxLog struct {
	mu    sync.Mutex
	lines map[string][]string // msg -> tags
}

type ctxTag struct{}

func (h *ctxLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *ctxLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *ctxLog) WithGroup(string) slog.Handler            { return h }
func (h *ctxLog) Handle(ctx context.Context, r slog.Record) error {
	tag, _ := ctx.Value(ctxTag{}).(string)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines[r.Message] = append(h.lines[r.Message], tag)
	return nil
}

// With WithOrderContexts, what the close path logs about one order of a
// batch is logged with that order's context (the delayed-task batch handler
// maps it to the order's task, so the line carries the task's trace id).
func TestCloseOrdersLogsWithOrderContexts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := &ctxLog{lines: map[string][]string{}}
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{Logger: slog.New(logs)})
	b.Shop(t)
	b.Place(t, "OK1", true, payment.Item{SKUID: 2, Quantity: 1})
	ordertest.Order(t, b.DB.DB, ordertest.OrderOpts{OrderNo: "BAD", Items: []ordertest.Item{{SKU: 6, Qty: 1, MissingStock: true}}})
	b.Place(t, "OK2", false, payment.Item{SKUID: 2, Quantity: 1})

	ctx := context.WithValue(b.Ctx, ctxTag{}, "batch")
	ctx = orders.WithOrderContexts(ctx, func(no string) context.Context {
		return context.WithValue(ctx, ctxTag{}, "order "+no)
	})
	outs, err := late.CloseOrders(ctx, []string{"OK1", "BAD", "OK2"})
	require.NoError(t, err)
	require.Equal(t, names([]orders.Outcome{orders.OutcomeClosed, orders.OutcomeDeadLettered, orders.OutcomeClosed}), names(outs))
	logs.mu.Lock()
	defer logs.mu.Unlock()
	require.Equal(t, []string{"order BAD"}, logs.lines["order close dead-lettered"])
}

// Batches larger than the page size are split; a batch whose rows need
// validation (a coupon not locked by its order) still closes the rest in the
// validated batch transaction and dead-letters only the culprit.
func TestCloseOrdersPagesAndValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 25 due orders, every other one with a coupon, in batches of 10.
	due := numbered("V", 25, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i%2 == 1, Items: []ordertest.Item{{SKU: int64(1 + i%4), Qty: 1}}}
	})
	base := b.build(t, due...)
	nos := make([]string, len(due))
	for i, o := range due {
		nos[i] = o.OrderNo
	}
	const victim = "V-15"
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE user_coupon SET order_no = 'SOMEONE-ELSE' WHERE order_no = ?`, victim)
	require.NoError(t, err)

	c := b.newCloser(t, orders.CloserConfig{PageSize: 10})
	rand.Shuffle(len(nos), func(i, j int) { nos[i], nos[j] = nos[j], nos[i] })
	outs, err := c.CloseOrders(b.Ctx, nos)
	require.NoError(t, err)
	for i, no := range nos {
		want := orders.OutcomeClosed
		if no == victim {
			want = orders.OutcomeDeadLettered
		}
		require.Equal(t, want, outs[i].Outcome, no)
	}
	require.Equal(t, len(due)-1, b.Counts(t).Closed)
	require.Contains(t, b.deadLetters(t)[victim].LastError, "not locked by this order")
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE user_coupon SET order_no = ? WHERE order_no = 'SOMEONE-ELSE'`, victim)
	require.NoError(t, err)
	b.Check(t, base)
}

// CloseOrders racing the sweep on the same orders: every due order closed
// exactly once, by one of them; nothing dead-lettered; invariants hold.
func TestCloseOrdersConcurrentWithRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Demo data: a race wants thousands of orders of every status, so both
	// sides are busy at once.
	res, base := b.Seed(t, orderdemo.Spec{Orders: 3000, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1, CouponFraction: 0.3})
	nos := b.ShuffledOrderNos(t)

	var g errgroup.Group
	var st orders.RunStats
	g.Go(func() error {
		var err error
		st, err = b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 100})
		return err
	})
	var closed, locked, notDue, paid, gone atomic.Int64
	const batchers = 3
	for w := range batchers {
		g.Go(func() error {
			for chunk := range slices.Chunk(nos[w*len(nos)/batchers:(w+1)*len(nos)/batchers], 50) {
				outs, err := b.Closer.CloseOrders(b.Ctx, chunk)
				if err != nil {
					return err
				}
				for i, o := range outs {
					switch o.Outcome {
					case orders.OutcomeClosed:
						closed.Add(1)
					case orders.OutcomeSkippedLocked:
						locked.Add(1)
					case orders.OutcomeNotDue:
						notDue.Add(1)
					case orders.OutcomeSkippedPaid:
						paid.Add(1)
					case orders.OutcomeSkippedClosed:
						gone.Add(1)
					default:
						return fmt.Errorf("order %s: unexpected %v", chunk[i], o)
					}
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	t.Logf("run closed %d (skipped locked %d); batches closed %d, locked %d, already closed %d",
		st.Closed, st.SkippedLocked, closed.Load(), locked.Load(), gone.Load())
	require.Zero(t, st.DeadLettered)
	require.EqualValues(t, res.NotDue, notDue.Load())
	require.EqualValues(t, res.Paid, paid.Load())
	// Whatever either side skipped as locked, a second pass closes.
	st2 := b.run(t, orders.RunOptions{})
	require.Equal(t, res.Due, st.Closed+int(closed.Load())+st2.Closed, "every due order closed exactly once")
	c := b.Counts(t)
	require.Equal(t, res.Due, c.Closed)
	require.Equal(t, res.Due, b.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	b.Check(t, base)
	require.Zero(t, b.RedisKeys(t))
}

// Payments racing batch closes: every order ends paid or closed, never both;
// a payment that lost is recorded as a conflict, not applied; the stock and
// coupons add up.
func TestCloseOrdersConcurrentWithPay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Demo data: a race wants many orders, so payments and closes meet.
	res, base := b.Seed(t, orderdemo.Spec{Orders: 1200, DueFraction: 1, CouponFraction: 0.5})
	nos := b.ShuffledOrderNos(t)

	var paid, tooLate, closed, skippedPaid atomic.Int64
	var g errgroup.Group
	for w := range 2 {
		g.Go(func() error {
			// Each closer walks the orders in its own order, in batches of 40.
			mine := slices.Clone(nos)
			if w == 1 {
				slices.Reverse(mine)
			}
			for chunk := range slices.Chunk(mine, 40) {
				outs, err := b.Closer.CloseOrders(b.Ctx, chunk)
				if err != nil {
					return err
				}
				for i, o := range outs {
					switch o.Outcome {
					case orders.OutcomeClosed:
						closed.Add(1)
					case orders.OutcomeSkippedPaid:
						skippedPaid.Add(1)
					case orders.OutcomeSkippedClosed, orders.OutcomeSkippedLocked:
					default:
						return fmt.Errorf("order %s: unexpected %v", chunk[i], o)
					}
				}
			}
			return nil
		})
	}
	b.payAll(&g, nos, &paid, &tooLate)
	require.NoError(t, g.Wait())
	t.Logf("paid %d, payments too late %d, closed %d, skipped paid %d", paid.Load(), tooLate.Load(), closed.Load(), skippedPaid.Load())
	c := b.Counts(t)
	require.EqualValues(t, paid.Load(), c.Paid)
	require.EqualValues(t, closed.Load(), c.Closed)
	require.Equal(t, res.Orders, c.Paid+c.Closed, "every order paid or closed")
	require.EqualValues(t, tooLate.Load(), b.Count(t, `SELECT COUNT(*) FROM payment_conflict`))
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	b.Check(t, base)
	require.Zero(t, b.RedisKeys(t))
}

// The payment step runs for a batch as for a page: "already paid" is
// skipped_paid, a failed call skipped_locked (the task retries), the rest
// close.
func TestCloseOrdersTradeStep(t *testing.T) {
	t.Parallel()
	p := ordertest.NewPaySide(t, "tok")
	b := setup(t)
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{TradeCloser: paytest.TradeCloser(t, p, 0)})
	b.Shop(t)
	for _, no := range []string{"T1", "T2", "T3", "T4"} {
		b.Place(t, no, true, payment.Item{SKUID: 2, Quantity: 2})
	}
	base := b.Snapshot(t)
	p.Set("T1", "not_found")
	p.Set("T2", "already_paid")
	p.Set("T3", "fail")
	outs, err := late.CloseOrders(b.Ctx, []string{"T1", "T2", "T3", "T4"})
	require.NoError(t, err)
	require.Equal(t, names([]orders.Outcome{orders.OutcomeClosed, orders.OutcomeSkippedPaid, orders.OutcomeSkippedLocked, orders.OutcomeClosed}), names(outs))
	require.Equal(t, 2, b.Counts(t).Closed)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	b.Check(t, base)
}

// The batch's first read probes the unique keys, one row per order number.
func TestCloseOrdersReadUsesIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Demo data: the plan is the point, and it follows the tables' size.
	b.Seed(t, orderdemo.Spec{Orders: 2000, DueFraction: 0.5, PaidFraction: 0.5})
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, next_retry_at)
		SELECT order_no, 'close', 'resolved', NOW(3) FROM order_info WHERE id % 2 = 0`)
	require.NoError(t, err)
	for _, table := range []string{"order_info", "order_dead_letter"} {
		_, err = b.DB.ExecContext(b.Ctx, `ANALYZE TABLE `+table)
		require.NoError(t, err)
	}
	var nos []string
	require.NoError(t, b.DB.SelectContext(b.Ctx, &nos, `SELECT order_no FROM order_info ORDER BY id DESC LIMIT 100`))
	q, args, err := sqlx.In(closesql.Default.OrdersForClose, nos)
	require.NoError(t, err)
	plan := explain(t, b, q, args...)
	require.Len(t, plan, 2)
	require.Equal(t, "uk_order_no", plan[0]["key"])
	require.Equal(t, "uk_order_stage", plan[1]["key"])
}
