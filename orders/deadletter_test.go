package orders_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

// Due orders on a SKU without an inventory row land in the dead letter
// table with the error, the others close; the sweep leaves them alone until
// next_retry_at, counts attempts on each retry, and closes and resolves them
// once the row is there.
func TestDeadLetterMissingSKU(t *testing.T) {
	t.Parallel()
	backoff := orders.DeadLetterBackoff{Base: time.Minute, Max: 10 * time.Minute}
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: backoff}))
	// Eight due orders over pages of three; every other one also holds SKU
	// 7, which has no stock row.
	const sku = 7
	var victims []string
	due := numbered("D", 8, func(i int) ordertest.OrderOpts {
		o := ordertest.OrderOpts{Age: time.Hour, Coupon: i%3 == 0, Items: []ordertest.Item{{SKU: int64(1 + i%3), Qty: 2}}}
		if i%2 == 1 {
			o.Items = append(o.Items, ordertest.Item{SKU: sku, Qty: 1, MissingStock: true})
			victims = append(victims, fmt.Sprintf("D-%d", i))
		}
		return o
	})
	base := b.build(t, due...)

	now := b.DB.Now(t)
	st := b.run(t, orders.RunOptions{PageSize: 3})
	require.Equal(t, len(victims), st.DeadLettered)
	require.Equal(t, len(due)-len(victims), st.Closed)
	dls := b.deadLetters(t)
	require.Len(t, dls, len(victims))
	for _, no := range victims {
		dl := dls[no]
		require.Equal(t, "close", dl.Stage)
		require.Equal(t, "waiting", dl.Status)
		require.Equal(t, 1, dl.Attempts)
		require.Contains(t, dl.LastError, "inventory row of sku 7 is missing")
		require.WithinDuration(t, now.Add(time.Minute), dl.NextRetryAt, 30*time.Second)
	}
	b.Check(t, base)

	// Before next_retry_at: left alone.
	st = b.run(t, orders.RunOptions{})
	require.Zero(t, st.Scanned)
	require.Equal(t, 1, b.deadLetters(t)[victims[0]].Attempts)

	// After it: retried, still failing, attempts counted, backoff doubled.
	later := b.shiftedCloser(t, 2*time.Minute, orders.CloserConfig{DeadLetterBackoff: backoff})
	st, err := later.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, len(victims), st.Scanned)
	require.Equal(t, len(victims), st.DeadLettered)
	for _, no := range victims {
		dl := b.deadLetters(t)[no]
		require.Equal(t, 2, dl.Attempts)
		require.Equal(t, "waiting", dl.Status)
		require.WithinDuration(t, now.Add(2*time.Minute+2*time.Minute), dl.NextRetryAt, 30*time.Second)
	}

	// The row is there: the next retry closes them and resolves the letters.
	ordertest.Restock(t, b.DB.DB, sku, 100)
	base = b.Snapshot(t)
	muchLater := b.shiftedCloser(t, 10*time.Minute, orders.CloserConfig{DeadLetterBackoff: backoff})
	st, err = muchLater.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, len(victims), st.Closed)
	for _, no := range victims {
		require.Equal(t, "resolved", b.deadLetters(t)[no].Status)
	}
	require.Equal(t, len(due), b.Counts(t).Closed)
	b.Check(t, base)
}

// A statement failing for the whole batch (here a duplicate close-log row)
// rolls the batch back; the page is then closed order by order and only the
// culprit is dead-lettered.
func TestBatchFailureFallsBackPerOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	due := numbered("B", 6, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i%2 == 0, Items: []ordertest.Item{{SKU: int64(1 + i%3), Qty: 1}}}
	})
	base := b.build(t, due...)
	const victim = "B-3"
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES (?, NOW(3), 'planted')`, victim)
	require.NoError(t, err)

	st := b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, len(due)-1, st.Closed)
	dl := b.deadLetters(t)[victim]
	require.Contains(t, dl.LastError, "Duplicate entry")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 0`))

	_, err = b.DB.ExecContext(b.Ctx, `DELETE FROM order_close_log WHERE order_no = ?`, victim)
	require.NoError(t, err)
	b.Check(t, base)
}

// A coupon not locked by its order is an error for that order alone.
func TestDeadLetterCouponMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	due := numbered("C", 6, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: true, Items: []ordertest.Item{{SKU: int64(1 + i%3), Qty: 1}}}
	})
	base := b.build(t, due...)
	const victim = "C-4"
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE user_coupon SET order_no = 'SOMEONE-ELSE' WHERE order_no = ?`, victim)
	require.NoError(t, err)

	st := b.run(t, orders.RunOptions{})
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, len(due)-1, st.Closed)
	require.Contains(t, b.deadLetters(t)[victim].LastError, "not locked by this order")

	_, err = b.DB.ExecContext(b.Ctx, `UPDATE user_coupon SET order_no = ? WHERE order_no = 'SOMEONE-ELSE'`, victim)
	require.NoError(t, err)
	b.Check(t, base)
}

// Locked stock short of what a SKU's orders hold: the page's other orders
// close in the batch, those on that SKU one by one until locked runs out, and
// the order that would drive it negative is dead-lettered.
func TestDeadLetterLockedStockShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Six due orders, three of them holding a unit each of SKU 3, whose
	// locked stock is one unit short of that.
	const sku = 3
	due := numbered("S", 6, func(i int) ordertest.OrderOpts {
		o := ordertest.OrderOpts{Age: time.Hour, Items: []ordertest.Item{{SKU: int64(1 + i%2), Qty: 2}}}
		if i%2 == 0 {
			o.Items = append(o.Items, ordertest.Item{SKU: sku, Qty: 1})
		}
		return o
	})
	b.build(t, due...)
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE inventory SET locked = locked - 1 WHERE sku_id = ?`, sku)
	require.NoError(t, err)
	base := b.Snapshot(t)

	st := b.run(t, orders.RunOptions{})
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, len(due)-1, st.Closed)
	var locked int64
	require.NoError(t, b.DB.GetContext(b.Ctx, &locked, `SELECT locked FROM inventory WHERE sku_id = ?`, sku))
	require.GreaterOrEqual(t, locked, int64(0))
	for _, dl := range b.deadLetters(t) {
		require.Contains(t, dl.LastError, "locked stock of sku 3")
	}
	// Only the planted shortfall remains: the unpaid order holds one unit
	// more than is locked.
	var ve *ordertest.ViolationsError
	require.True(t, errors.As(ordertest.Check(b.Ctx, b.DB, base), &ve))
	require.Equal(t, []string{"stock_locked"}, ve.Rules())
	require.Len(t, ve.Violations, 1)
}

// After ParkAfter failures a dead letter is parked: the sweep never takes the
// order again, and CloseOrder says so.
func TestDeadLetterParkAfter(t *testing.T) {
	t.Parallel()
	backoff := orders.DeadLetterBackoff{Base: time.Minute, Max: time.Hour, ParkAfter: 2}
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: backoff}))
	// Two due orders that close, one poisoned by a SKU without a stock row.
	for _, o := range []ordertest.OrderOpts{
		{OrderNo: "OK-1", Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 1}}},
		{OrderNo: "POISON", Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 1}, {SKU: 4, Qty: 2, MissingStock: true}}},
		{OrderNo: "OK-2", Age: time.Hour, Coupon: true, Items: []ordertest.Item{{SKU: 2, Qty: 3}}},
	} {
		ordertest.Order(t, b.DB.DB, o)
	}

	st := b.run(t, orders.RunOptions{})
	require.Positive(t, st.DeadLettered)
	n := st.DeadLettered
	later := b.shiftedCloser(t, 5*time.Minute, orders.CloserConfig{DeadLetterBackoff: backoff})
	st, err := later.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, n, st.DeadLettered)
	var victim string
	for no, dl := range b.deadLetters(t) {
		require.Equal(t, "parked", dl.Status)
		require.Equal(t, 2, dl.Attempts)
		victim = no
	}
	much := b.shiftedCloser(t, 100*time.Hour, orders.CloserConfig{DeadLetterBackoff: backoff})
	st, err = much.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "parked orders are left alone")
	out, err := much.CloseOrder(b.Ctx, victim)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeParked, out)
}

// A stock row held by another transaction makes the page's statements time
// out (1205): the page is retried, then closed order by order; only the order
// on that row is left open, skipped (its rows are contended, nothing is wrong
// with it: no dead letter), and a later pass closes it.
func TestLockWaitTimeoutRetriedThenSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := mysql.ParseDSN(b.DB.DSN)
	require.NoError(t, err)
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	impatient, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { impatient.Close() })
	backoff := orders.DeadLetterBackoff{Base: time.Minute}
	c, err := orders.NewCloser(impatient, b.Locker, orders.CloserConfig{LockAttempts: 2, DeadLetterBackoff: backoff})
	require.NoError(t, err)
	orders.ShiftClock(c, 31*time.Minute)

	due := numbered("W", 5, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i == 0, Items: []ordertest.Item{{SKU: int64(1 + i%2), Qty: 1}}}
	})
	b.build(t, due...)
	require.NoError(t, b.Svc.AddStock(b.Ctx, 9999, 10))
	b.Place(t, "HELD", true, payment.Item{SKUID: 9999, Quantity: 2})
	base := b.Snapshot(t)

	holder, err := b.DB.BeginTxx(b.Ctx, nil)
	require.NoError(t, err)
	_, err = holder.ExecContext(b.Ctx, `SELECT * FROM inventory WHERE sku_id = 9999 FOR UPDATE`)
	require.NoError(t, err)
	st, err := c.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, holder.Rollback())
	require.NoError(t, err)
	require.Equal(t, len(due), st.Closed)
	require.Zero(t, st.DeadLettered)
	require.Equal(t, 1, st.SkippedLocked)
	require.Equal(t, 1, st.Contended)
	// Two page transactions, then the held order's own two: each rolled
	// back by the lock wait.
	require.Equal(t, 4, st.Conflicts, "close transactions rolled back by contention")
	require.Empty(t, b.deadLetters(t))
	b.Check(t, base)

	later, err := orders.NewCloser(impatient, b.Locker, orders.CloserConfig{DeadLetterBackoff: backoff})
	require.NoError(t, err)
	orders.ShiftClock(later, 33*time.Minute)
	st, err = later.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	require.Empty(t, b.deadLetters(t))
	b.Check(t, base)
}

// A dead letter's upsert rolled back as a deadlock's victim is run again,
// and the run goes on. The order's letter is due, so the run takes it and
// its close fails (no stock row); the upsert on the existing letter locks
// its uk_order_stage entry and row, then moves its idx_status_retry entry
// to the next retry time, into a gap another transaction holds; that
// transaction, once the upsert waits, asks for the letter's row.
func TestDeadLetterUpsertRunAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const poison = "DEADLOCK-U"
	base := b.build(t, ordertest.OrderOpts{OrderNo: poison, Age: time.Hour,
		Items: []ordertest.Item{{SKU: 1, Qty: 1}, {SKU: 4, Qty: 2, MissingStock: true}}})
	var st orders.RunStats
	err := b.letterDeadlock(t, poison, "INSERT INTO order_dead_letter", func() (err error) {
		st, err = b.Closer.Run(b.Ctx, orders.RunOptions{})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, st.Scanned)
	require.Equal(t, 1, st.DeadLettered)
	require.Zero(t, st.Closed)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = ?`, poison))
	dl := b.letters(t)[poison]
	require.Equal(t, 2, dl.Attempts, "written once")
	require.Equal(t, "waiting", dl.Status)
	require.Contains(t, dl.LastError, "inventory row of sku 4 is missing")
	require.Equal(t, "old failure", b.letters(t)["LATER"].LastError)
	b.Check(t, base)
}
