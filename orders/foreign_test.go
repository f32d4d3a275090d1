package orders_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
)

// The close path on a shop's own schema (ordertest's foreign shop): other
// table and column names, status 0 unpaid and 4 cancelled, one fixed
// timeout, lines keyed by the order's id, stock given back to a locked
// column or added back, a coupon matched in a history table, points given
// back to the member.

// foreignSetup is setup with the foreign shop's tables and a Closer on its
// schema, giving stock back as st says.
func foreignSetup(t *testing.T, st ordertest.ForeignStock) *testBundle {
	t.Helper()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Schema: ordertest.ForeignSchema(st)}))
	ordertest.ForeignTables(t, b.DB.DB)
	return b
}

// due is an age past the foreign shop's fixed timeout.
const due = ordertest.ForeignTimeout + 5*time.Minute

func TestForeignSchemaClosesWithEveryGiveback(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]ordertest.ForeignStock{"locked given back": ordertest.LockedOnly,
		"stock added back": ordertest.TakenAtPlacement} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := foreignSetup(t, st)
			place := func(o ordertest.ForeignOpts) { ordertest.ForeignOrder(t, b.DB.DB, o) }
			// Two due orders of member 1 on SKU 1: one page sums their
			// quantities and their points.
			place(ordertest.ForeignOpts{OrderSn: "SN-1", MemberID: 1, Age: due, Coupon: 501, Points: 30,
				Items: []ordertest.Item{{SKU: 1, Qty: 2}, {SKU: 2, Qty: 1}}})
			place(ordertest.ForeignOpts{OrderSn: "SN-2", MemberID: 1, Age: due, Points: 20, Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
			place(ordertest.ForeignOpts{OrderSn: "SN-3", MemberID: 2, Age: due, Coupon: 502, Items: []ordertest.Item{{SKU: 3, Qty: 4}}})
			// Not due (the fixed timeout, not a column) and paid: left alone.
			place(ordertest.ForeignOpts{OrderSn: "SN-4", MemberID: 2, Age: time.Minute, Coupon: 503, Points: 10,
				Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
			place(ordertest.ForeignOpts{OrderSn: "SN-5", MemberID: 3, Age: due, Status: ordertest.ForeignPaid, Coupon: 504, Points: 5,
				Items: []ordertest.Item{{SKU: 2, Qty: 1}}})
			base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
			require.NoError(t, err)
			overdue, _, err := b.Closer.Overdue(b.Ctx)
			require.NoError(t, err)
			require.Equal(t, 3, overdue, "the gauge reads the declared table with its fixed timeout")

			st1, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, 3, st1.Scanned, st1.String())
			require.Equal(t, 3, st1.Closed, st1.String())
			require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, st))

			status := func(sn string) int {
				return b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = ?`, sn)
			}
			for sn, want := range map[string]int{"SN-1": 4, "SN-2": 4, "SN-3": 4, "SN-4": 0, "SN-5": 1} {
				require.Equal(t, want, status(sn), sn)
			}
			require.Equal(t, 3, b.DB.Count(t, `SELECT COUNT(*) FROM t_order WHERE cancel_time IS NOT NULL AND updated_at IS NOT NULL`))
			// Exact values: member 1 has its 50 points back, member 2 still
			// spends 10 on its unpaid order, member 3 its paid 5.
			for id, want := range map[int64]int{1: 1000, 2: 990, 3: 995} {
				require.Equal(t, want, b.DB.Count(t, `SELECT points FROM t_member WHERE id = ?`, id), "member %d", id)
			}
			for coupon, want := range map[int64]int{501: 0, 502: 0, 503: 1, 504: 1} {
				require.Equal(t, want, b.DB.Count(t, `SELECT use_status FROM t_coupon_history WHERE coupon_id = ?`, coupon), "coupon %d", coupon)
			}
			if st == ordertest.LockedOnly {
				// SKU 1: SN-4's reservation is all that stays locked.
				require.Equal(t, 1, b.DB.Count(t, `SELECT locked FROM t_sku_stock WHERE sku = 1`))
				require.Equal(t, 0, b.DB.Count(t, `SELECT locked FROM t_sku_stock WHERE sku = 3`))
			} else {
				require.Equal(t, 99, b.DB.Count(t, `SELECT stock FROM t_goods WHERE id = 1`))
				require.Equal(t, 99, b.DB.Count(t, `SELECT stock FROM t_goods WHERE id = 2`), "SN-5 paid: its goods stay taken")
			}

			// Nothing is given back twice: a second run finds nothing, the
			// one-order and batch entry points report the orders as they are.
			st2, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, 0, st2.Scanned)
			out, err := b.Closer.CloseOrder(b.Ctx, "SN-4")
			require.NoError(t, err)
			require.Equal(t, orders.OutcomeNotDue, out)
			res, err := b.Closer.CloseOrders(b.Ctx, []string{"SN-1", "SN-5", "SN-4", "nope"})
			require.NoError(t, err)
			require.Equal(t, []orders.Outcome{orders.OutcomeSkippedClosed, orders.OutcomeSkippedPaid, orders.OutcomeNotDue, orders.OutcomeNotFound},
				outcomes(res))
			require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, st))
		})
	}
}

func outcomes(rs []orders.Result) []orders.Outcome {
	out := make([]orders.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// TestForeignSchemaBadCouponDeadLetters: an order whose coupon matches no
// used row cannot give it back; it alone is dead-lettered, the rest of
// its page closes, and nothing of it changes.
func TestForeignSchemaBadCouponDeadLetters(t *testing.T) {
	t.Parallel()
	b := foreignSetup(t, ordertest.LockedOnly)
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: "OK-1", MemberID: 1, Age: due, Coupon: 1, Points: 5,
		Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: "BAD-1", MemberID: 2, Age: due, Coupon: 2, Points: 7,
		Items: []ordertest.Item{{SKU: 1, Qty: 2}}})
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE t_coupon_history SET use_status = 0 WHERE coupon_id = 2`)
	require.NoError(t, err)

	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, st.String())
	require.Equal(t, 1, st.DeadLettered, st.String())
	require.Equal(t, 4, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'OK-1'`))
	require.Equal(t, 0, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'BAD-1'`))
	require.Equal(t, 2, b.DB.Count(t, `SELECT locked FROM t_sku_stock WHERE sku = 1`), "BAD-1 still holds its reservation")
	require.Equal(t, 993, b.DB.Count(t, `SELECT points FROM t_member WHERE id = 2`))
	require.Contains(t, b.letters(t)["BAD-1"].LastError, "0 used rows of t_coupon_history match the order, not one")
}

// TestForeignSchemaCouponMatchCountedPerOrder: in one page, an order
// whose coupon matches two used rows (a copy used by another order) and
// one whose coupon matches none add up to the page's expected count of
// rows. Neither can give its coupon back as its data stands: both are
// dead-lettered with their rows untouched, and the third order closes.
func TestForeignSchemaCouponMatchCountedPerOrder(t *testing.T) {
	t.Parallel()
	b := foreignSetup(t, ordertest.LockedOnly)
	for i, sn := range []string{"OK-1", "TWO-1", "NONE-1"} {
		ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: sn, MemberID: int64(1 + i), Age: due, Coupon: int64(1 + i),
			Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	}
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO t_coupon_history (member_id, coupon_id, use_status) VALUES (2, 2, 1)`)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE t_coupon_history SET use_status = 0 WHERE coupon_id = 3`)
	require.NoError(t, err)

	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, st.String())
	require.Equal(t, 2, st.DeadLettered, st.String())
	require.Equal(t, 2, b.DB.Count(t, `SELECT COUNT(*) FROM t_coupon_history WHERE coupon_id = 2 AND use_status = 1`),
		"both used copies of TWO-1's coupon stay used")
	require.Equal(t, 0, b.DB.Count(t, `SELECT COUNT(*) FROM t_coupon_history WHERE coupon_id = 1 AND use_status = 1`))
	letters := b.letters(t)
	require.Contains(t, letters["TWO-1"].LastError, "2 used rows of t_coupon_history match the order, not one")
	require.Contains(t, letters["NONE-1"].LastError, "0 used rows of t_coupon_history match the order, not one")
}

// TestForeignSchemaExactlyOnceWithPayments closes a foreign shop's due
// orders with two shards running at once while the shop pays half of
// them: every order ends paid or cancelled, never both, and stock, coupons
// and points are given back exactly once, for the cancelled ones only.
func TestForeignSchemaExactlyOnceWithPayments(t *testing.T) {
	t.Parallel()
	b := foreignSetup(t, ordertest.LockedOnly)
	const n = 400
	for i := range n {
		o := ordertest.ForeignOpts{OrderSn: fmt.Sprintf("R-%d", i), MemberID: int64(1 + i%17), Age: due, Points: int64(i % 5),
			Items: []ordertest.Item{{SKU: int64(1 + i%7), Qty: 1}, {SKU: int64(8 + i%3), Qty: 2}}}
		if i%3 == 0 {
			o.Coupon = int64(1000 + i)
		}
		ordertest.ForeignOrder(t, b.DB.DB, o)
	}
	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)

	paid := b.payWhileClosing(t, "R-%d", n)
	require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
	payments := 0
	for i, p := range paid {
		want := ordertest.ForeignCancelled
		if p {
			want = ordertest.ForeignPaid
			payments++
		}
		require.Equal(t, want, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = ?`, fmt.Sprintf("R-%d", i)), "R-%d", i)
	}
	require.Equal(t, n-payments, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	t.Logf("%d paid, %d cancelled", payments, n-payments)
}

// payWhileClosing pays half of the n foreign orders named by format
// (with their index) while two shards close them, then closes what is
// left, and returns which orders the shop paid. Four payers against two
// shards held to about a second each, so that both sides win some orders.
func (b *testBundle) payWhileClosing(t *testing.T, format string, n int) []bool {
	t.Helper()
	var wg sync.WaitGroup
	paid := make([]bool, n)
	for part := range slices.Chunk(rand.Perm(n)[:n/2], n/8) {
		wg.Go(func() {
			for _, i := range part {
				ok, err := ordertest.ForeignPay(b.Ctx, b.DB.DB, fmt.Sprintf(format, i))
				if err != nil {
					t.Errorf("pay %s: %v", fmt.Sprintf(format, i), err)
					return
				}
				paid[i] = ok
			}
		})
	}
	for shard := range 2 {
		wg.Go(func() {
			_, err := b.Closer.Run(b.Ctx, orders.RunOptions{ShardIndex: shard, ShardTotal: 2, PageSize: 20, MaxPerSecond: float64(n / 2)})
			if err != nil {
				t.Errorf("shard %d: %v", shard, err)
			}
		})
	}
	wg.Wait()
	_, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	return paid
}

// TestForeignSchemaCouponByIDWithoutStock: a coupon kept by id with text
// states ('USED' → 'UNUSED', the row not naming its order) and no stock
// table declared: the coupon comes back, no stock is touched, and a coupon
// not in state USED dead-letters its order alone.
func TestForeignSchemaCouponByIDWithoutStock(t *testing.T) {
	t.Parallel()
	sch := ordertest.ForeignSchema(ordertest.TakenAtPlacement)
	sch.Coupon, sch.Stock, sch.Extra = ordertest.ForeignCouponByID(), nil, nil
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Schema: sch}))
	ordertest.ForeignTables(t, b.DB.DB)
	for _, sn := range []string{"C-1", "C-2", "C-BAD"} {
		ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: sn, Age: due, UserCoupon: true,
			Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	}
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE t_user_coupon c JOIN t_order o ON o.user_coupon_id = c.id
		SET c.state = 'UNUSED' WHERE o.order_sn = 'C-BAD'`)
	require.NoError(t, err)

	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, st.Closed, st.String())
	require.Equal(t, 1, st.DeadLettered, st.String())
	require.Equal(t, 3, b.DB.Count(t, `SELECT COUNT(*) FROM t_user_coupon WHERE state = 'UNUSED'`))
	require.Equal(t, 2, b.DB.Count(t, `SELECT COUNT(*) FROM t_order WHERE order_status = 4`))
	require.Equal(t, 97, b.DB.Count(t, `SELECT stock FROM t_goods WHERE id = 1`), "no stock table declared: nothing added back")
	require.Contains(t, b.letters(t)["C-BAD"].LastError, "is status UNUSED")
}

// TestForeignSchemaDeadLetterRetry: deadLetterRetryJob on a declared
// schema closes a letter's order when it is due, and parks the letter of an
// order no longer in the declared table, naming that table.
func TestForeignSchemaDeadLetterRetry(t *testing.T) {
	t.Parallel()
	b := foreignSetup(t, ordertest.LockedOnly)
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: "L-1", Age: due, Coupon: 4, Points: 9,
		Items: []ordertest.Item{{SKU: 1, Qty: 1}}})
	base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at) VALUES
		('L-1', 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE),
		('GONE-1', 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE)`)
	require.NoError(t, err)

	rs, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, rs.Closed)
	require.Equal(t, 1, rs.Parked)
	require.Equal(t, "order not found in t_order", b.letters(t)["GONE-1"].StatusReason)
	require.Equal(t, 4, b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'L-1'`))
	require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
}
