package orders_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/schema"
)

// The close path on a foreign shop that stores each order's payment
// deadline itself (t_order.expire_at, indexed with the status) and names
// it in order.schema.dueTime: an order is due when expire_at has passed,
// whenever it was created.

// foreignDueSchema is the foreign shop (LockedOnly) declared by its
// deadline column instead of its creation time and one timeout.
func foreignDueSchema() schema.Schema {
	s := ordertest.ForeignSchema(ordertest.LockedOnly)
	s.Orders.CreateTime, s.Orders.TimeoutMinutes = "", 0
	s.Orders.DueTime, s.Orders.ScanIndex = "expire_at", "idx_status_expire"
	return s
}

// foreignDueSetup is foreignSetup on foreignDueSchema, with the deadline
// column and its index added to t_order, and a Closer of cfg on it.
func foreignDueSetup(t *testing.T, cfg orders.CloserConfig) *testBundle {
	t.Helper()
	cfg.Schema = foreignDueSchema()
	b := setup(t, paytest.WithCloser(cfg))
	ordertest.ForeignTables(t, b.DB.DB)
	_, err := b.DB.ExecContext(b.Ctx, `ALTER TABLE t_order ADD COLUMN expire_at DATETIME(3) NULL,
		ADD KEY idx_status_expire (order_status, expire_at)`)
	require.NoError(t, err)
	return b
}

// expireIn sets the deadline of order sn to d from the database's clock.
func (b *testBundle) expireIn(t *testing.T, sn string, d time.Duration) {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE t_order SET expire_at = NOW(3) + INTERVAL ? MICROSECOND WHERE order_sn = ?`, d.Microseconds(), sn)
	require.NoError(t, err)
}

// TestForeignDueTimeExactlyOnceWithPayments is
// TestForeignSchemaExactlyOnceWithPayments on a shop keeping each order's
// deadline: orders created long ago whose deadline is still ahead stay
// unpaid, orders created a minute ago whose deadline has passed are closed,
// the overdue gauge counts exactly the due ones, capped runs resume where
// the last stopped, and while the shop pays half of the orders and two
// shards close the rest, every order ends paid, cancelled or (not due)
// unpaid, with stock, coupons and points given back exactly once.
func TestForeignDueTimeExactlyOnceWithPayments(t *testing.T) {
	t.Parallel()
	b := foreignDueSetup(t, orders.CloserConfig{})
	const n = 400
	notDue := func(i int) bool { return i%4 == 0 }
	for i := range n {
		sn := fmt.Sprintf("E-%d", i)
		o := ordertest.ForeignOpts{OrderSn: sn, MemberID: int64(1 + i%17), Age: due, Points: int64(i % 5),
			Items: []ordertest.Item{{SKU: int64(1 + i%7), Qty: 1}, {SKU: int64(8 + i%3), Qty: 2}}}
		if i%4 == 1 {
			o.Age = time.Minute // created a minute ago: due by its deadline only
		}
		if i%3 == 0 {
			o.Coupon = int64(1000 + i)
		}
		ordertest.ForeignOrder(t, b.DB.DB, o)
		if notDue(i) {
			b.expireIn(t, sn, time.Hour) // created long ago: not due by its deadline
		} else {
			b.expireIn(t, sn, -time.Duration(1+i%50)*time.Second)
		}
	}
	wantDue := n - n/4
	count, oldest, err := b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, wantDue, count, "the gauge counts the orders past their deadline")
	require.GreaterOrEqual(t, oldest, 50*time.Second, "the earliest deadline passed 50s ago")
	require.Less(t, oldest, 3*time.Minute, "expire_at's, not created_at + 15 minutes (5 minutes ago)")

	// Capped runs resume where the last one stopped: the second closes
	// the next orders by deadline, not the first one's again.
	for range 2 {
		st, err := b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 10, MaxOrders: 25})
		require.NoError(t, err)
		require.Equal(t, 25, st.Closed, st.String())
	}
	require.Equal(t, 50, b.DB.Count(t, `SELECT COUNT(*) FROM (SELECT order_status FROM t_order WHERE expire_at <= NOW(3)
		ORDER BY expire_at, id LIMIT 50) x WHERE order_status = 4`), "the 50 earliest deadlines closed first")
	require.Equal(t, 50, b.DB.Count(t, `SELECT COUNT(*) FROM t_order WHERE order_status = 4`))
	require.Equal(t, 1, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_cursor c
		JOIN (SELECT id, expire_at FROM t_order WHERE order_status = 4 ORDER BY expire_at DESC, id DESC LIMIT 1) o
		ON c.order_id = o.id AND c.create_time = CAST(o.expire_at AS DATETIME)
		WHERE c.order_table = 't_order'`), "the cursor is the 50th closed order's (deadline, id), to the second")

	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)
	paid := b.payWhileClosing(t, "E-%d", n)

	require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
	cancelled := b.paidOrCancelled(t, "E-%d", paid, notDue)
	require.Equal(t, cancelled, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Zero(t, b.DB.Count(t, `SELECT COUNT(*) FROM t_order WHERE order_status = 0 AND expire_at <= NOW(3)`),
		"every unpaid order past its deadline was closed")
	count, _, err = b.Closer.Overdue(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, count)

	// The order view's due card shows the deadline.
	in, err := inspect.New(b.DB.DB, orders.CompensateLocal).InTables(foreignDueSchema(), []string{"t_order"})
	require.NoError(t, err)
	d, err := in.Order(b.Ctx, "E-0")
	require.NoError(t, err)
	var expire time.Time
	require.NoError(t, b.DB.GetContext(b.Ctx, &expire, `SELECT expire_at FROM t_order WHERE order_sn = 'E-0'`))
	require.True(t, expire.Equal(d.Shop.Deadline()), "deadline %v, want %v", d.Shop.Deadline(), expire)
}

// TestForeignDueTimeGuardRechecksTheDeadline: the status CAS repeats the
// deadline under the row lock. Orders whose deadline the shop moves ahead,
// or which it pays, after the page read them (in the payment step, under
// the close's Redis locks) are skipped; the others close.
func TestForeignDueTimeGuardRechecksTheDeadline(t *testing.T) {
	t.Parallel()
	var b *testBundle
	trade := guardTrade(&b, `expire_at = NOW(3) + INTERVAL 1 HOUR`)
	b = foreignDueSetup(t, orders.CloserConfig{TradeCloser: trade})
	for i, sn := range guardOrders {
		ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: sn, Age: time.Minute, Coupon: int64(100 + i), Points: 3,
			Items: []ordertest.Item{{SKU: 2, Qty: 1}}})
		b.expireIn(t, sn, -time.Second)
	}
	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)
	b.guardOutcomes(t)
	require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
}

// paidOrCancelled checks the orders named by format (with their index)
// after payWhileClosing: the paid ones paid, the not due ones unpaid, the
// others cancelled or paid; it returns how many were cancelled.
func (b *testBundle) paidOrCancelled(t *testing.T, format string, paid []bool, notDue func(int) bool) int {
	t.Helper()
	cancelled := 0
	for i, p := range paid {
		sn := fmt.Sprintf(format, i)
		got := b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = ?`, sn)
		switch {
		case p:
			require.Equal(t, ordertest.ForeignPaid, got, sn)
		case notDue(i):
			require.Equal(t, ordertest.ForeignUnpaid, got, "%s is not due", sn)
		default:
			require.Contains(t, []int{ordertest.ForeignCancelled, ordertest.ForeignPaid}, got, sn)
		}
		if got == ordertest.ForeignCancelled {
			cancelled++
		}
	}
	return cancelled
}

// guardOrders are the orders of a guard test, all due: the trade step
// (guardTrade) pays the PAID ones and moves the deadline of the LATER ones
// ahead; the OK ones close.
var guardOrders = []string{"RUN-PAID", "RUN-LATER", "RUN-OK", "PAID", "PAID-OK", "LATER", "LATER-OK"}

// guardTrade is a payment step that, for guardOrders, pays PAID and
// RUN-PAID as the shop does, and runs UPDATE t_order SET later on LATER
// and RUN-LATER (their deadline an hour ahead), on *b's database.
func guardTrade(b **testBundle, later string) tradeFunc {
	return func(ctx context.Context, sn string) (orders.TradeResult, error) {
		switch sn {
		case "LATER", "RUN-LATER":
			_, err := (*b).DB.ExecContext(ctx, `UPDATE t_order SET `+later+` WHERE order_sn = ?`, sn)
			return orders.TradeClosed, err
		case "PAID", "RUN-PAID":
			ok, err := ordertest.ForeignPay(ctx, (*b).DB.DB, sn)
			if err == nil && !ok {
				err = fmt.Errorf("pay %s: not unpaid", sn)
			}
			return orders.TradeClosed, err
		}
		return orders.TradeClosed, nil
	}
}

// guardOutcomes closes guardOrders by CloseOrders and by a run, the
// payment step being guardTrade's, and checks that the paid and later
// ones were skipped and the others closed.
func (b *testBundle) guardOutcomes(t *testing.T) {
	t.Helper()
	for _, batch := range [][]string{{"PAID", "PAID-OK"}, {"LATER", "LATER-OK"}} {
		outs, err := b.Closer.CloseOrders(b.Ctx, batch)
		require.NoError(t, err)
		want := orders.OutcomeSkippedPaid
		if batch[0] == "LATER" {
			want = orders.OutcomeNotDue
		}
		require.Equal(t, []orders.Outcome{want, orders.OutcomeClosed}, []orders.Outcome{outs[0].Outcome, outs[1].Outcome}, batch[0])
	}
	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 1})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, "RUN-OK: %s", st)
	require.Equal(t, 1, st.SkippedPaid)
	require.Equal(t, 1, st.SkippedNotDue)
	for sn, want := range map[string]int{"RUN-PAID": 1, "RUN-LATER": 0, "RUN-OK": 4, "PAID": 1, "PAID-OK": 4, "LATER": 0, "LATER-OK": 4} {
		require.Equal(t, want, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = ?`, sn), sn)
	}
}

// TestForeignDueTimeNullIsNeverDue: an order whose deadline is NULL is
// never due: the sweep leaves it, CloseOrder says it is not due, and the
// order view reads it.
func TestForeignDueTimeNullIsNeverDue(t *testing.T) {
	t.Parallel()
	b := foreignDueSetup(t, orders.CloserConfig{})
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: "N-1", Age: due, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Closed+st.Scanned, st.String())
	out, err := b.Closer.CloseOrder(b.Ctx, "N-1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, out)
	outs, err := b.Closer.CloseOrders(b.Ctx, []string{"N-1"})
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, outs[0].Outcome)
	require.Equal(t, ordertest.ForeignUnpaid, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'N-1'`))

	in, err := inspect.New(b.DB.DB, orders.CompensateLocal).InTables(foreignDueSchema(), []string{"t_order"})
	require.NoError(t, err)
	d, err := in.Order(b.Ctx, "N-1")
	require.NoError(t, err)
	require.Equal(t, 9999, d.Shop.Deadline().Year(), "never due: the latest time")
}
