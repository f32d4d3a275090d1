package orders_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/schema"
)

// The close path on a foreign shop that soft-deletes orders
// (order.schema.softDelete): a deleted unpaid order past its deadline is
// never closed and nothing it holds is given back, on any path; a live one
// is closed exactly once; a delete committed while a close waits to claim
// the order wins.

// softDeleteShop is one way of marking an order deleted: the column
// added to the foreign shop's t_order, the declaration, and the shop's
// delete.
type softDeleteShop struct {
	name   string
	column string // ADD COLUMN definition
	decl   schema.SoftDelete
	delete string // SET clause of the shop's delete
}

var softDeleteShops = []softDeleteShop{
	{"is_deleted", "is_deleted TINYINT NOT NULL DEFAULT 0",
		schema.SoftDelete{Column: "is_deleted", Live: schema.Int(0)}, "is_deleted = 1"},
	{"deleted_at", "deleted_at DATETIME(3) NULL",
		schema.SoftDelete{Column: "deleted_at"}, "deleted_at = NOW(3)"},
}

// softDeleteSetup is foreignSetup (stock reservations given back) with
// sh's column on t_order and a Closer declaring it, configured as cfg
// says besides.
func softDeleteSetup(t *testing.T, sh softDeleteShop, cfg orders.CloserConfig) *testBundle {
	t.Helper()
	cfg.Schema = ordertest.ForeignSchema(ordertest.LockedOnly)
	cfg.Schema.Orders.SoftDelete = sh.decl
	b := setup(t, paytest.WithCloser(cfg))
	ordertest.ForeignTables(t, b.DB.DB)
	_, err := b.DB.ExecContext(b.Ctx, "ALTER TABLE t_order ADD COLUMN "+sh.column)
	require.NoError(t, err)
	return b
}

// placeSoftDeleted places a due foreign order holding a reservation, a
// coupon and points, and deletes it as the shop does when deleted.
func (b *testBundle) placeSoftDeleted(t *testing.T, sh softDeleteShop, sn string, coupon int64, age time.Duration, deleted bool) {
	t.Helper()
	ordertest.ForeignOrder(t, b.DB.DB, ordertest.ForeignOpts{OrderSn: sn, MemberID: 1 + coupon%3, Age: age, Coupon: coupon, Points: 10,
		Items: []ordertest.Item{{SKU: 1, Qty: 2}, {SKU: 2 + coupon%2, Qty: 1}}})
	if deleted {
		b.softDelete(t, sh, sn)
	}
}

// softDelete deletes order sn as the shop does (autocommit).
func (b *testBundle) softDelete(t *testing.T, sh softDeleteShop, sn string) {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, "UPDATE t_order SET "+sh.delete+" WHERE order_sn = ?", sn)
	require.NoError(t, err)
}

// foreignStatus is order sn's t_order.order_status.
func (b *testBundle) foreignStatus(t *testing.T, sn string) int {
	t.Helper()
	return b.DB.Count(t, `SELECT order_status FROM t_order WHERE order_sn = ?`, sn)
}

func TestSoftDeletedOrdersAreNeverClosed(t *testing.T) {
	t.Parallel()
	for _, sh := range softDeleteShops {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			b := softDeleteSetup(t, sh, orders.CloserConfig{})
			b.placeSoftDeleted(t, sh, "L-1", 101, due, false)
			b.placeSoftDeleted(t, sh, "L-2", 102, due, false)
			b.placeSoftDeleted(t, sh, "D-1", 201, due, true)
			b.placeSoftDeleted(t, sh, "D-2", 202, due, true)
			b.placeSoftDeleted(t, sh, "D-3", 203, 2*due, true)
			// The deleted orders hold their reservation, coupon and points
			// (the shop gives them back elsewhere, or not at all): the
			// baseline counts them held, so giving any back breaks it.
			base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
			require.NoError(t, err)
			overdue, _, err := b.Closer.Overdue(b.Ctx)
			require.NoError(t, err)
			require.Equal(t, 2, overdue, "the gauge counts live orders only")

			st := b.run(t, orders.RunOptions{PageSize: 2})
			require.Equal(t, 2, st.Scanned, st.String())
			require.Equal(t, 2, st.Closed, st.String())
			require.Equal(t, 0, b.run(t, orders.RunOptions{}).Scanned, "nothing left to scan")

			// The one-order and batch entry points skip them as closed by
			// someone else; the dead-letter replay resolves their letters.
			out, err := b.Closer.CloseOrder(b.Ctx, "D-1")
			require.NoError(t, err)
			require.Equal(t, orders.OutcomeSkippedClosed, out)
			res, err := b.Closer.CloseOrders(b.Ctx, []string{"D-2", "D-3", "L-1"})
			require.NoError(t, err)
			require.Equal(t, []orders.Outcome{orders.OutcomeSkippedClosed, orders.OutcomeSkippedClosed, orders.OutcomeSkippedClosed},
				outcomes(res))
			ordertest.DeadLetter(t, b.DB.DB, "D-2", "t_order")
			rs, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
			require.NoError(t, err)
			require.Equal(t, 1, rs.AlreadyDone, rs.String())
			letter := b.letters(t)["D-2"]
			require.Equal(t, "resolved", letter.Status)
			require.Equal(t, "order is no longer unpaid (closed before, further on, or soft-deleted); nothing to close", letter.StatusReason)

			for sn, want := range map[string]int{"L-1": ordertest.ForeignCancelled, "L-2": ordertest.ForeignCancelled,
				"D-1": ordertest.ForeignUnpaid, "D-2": ordertest.ForeignUnpaid, "D-3": ordertest.ForeignUnpaid} {
				require.Equal(t, want, b.foreignStatus(t, sn), sn)
			}
			require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
			for coupon, want := range map[int64]int{101: 0, 102: 0, 201: 1, 202: 1, 203: 1} {
				require.Equal(t, want, b.DB.Count(t, `SELECT use_status FROM t_coupon_history WHERE coupon_id = ?`, coupon), "coupon %d", coupon)
			}
			require.Equal(t, 2, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))
		})
	}
}

// holdDelete starts the shop's delete of sn in a transaction left open,
// so that it holds the order's row lock, and returns its commit.
func (b *testBundle) holdDelete(t *testing.T, sh softDeleteShop, sn string) func() {
	t.Helper()
	tx, err := b.DB.BeginTxx(b.Ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.ExecContext(b.Ctx, "UPDATE t_order SET "+sh.delete+" WHERE order_sn = ?", sn)
	require.NoError(t, err)
	return func() { require.NoError(t, tx.Commit()) }
}

// awaitLockWait waits until a claim of the close (the status CAS, or the
// locking read of the orders) has been running on t_order for 100 ms: a
// one-row statement that long is waiting for the row the held delete
// locks. PROCESSLIST, not INNODB_TRX: the server refreshes that only when
// nobody (parallel tests included) read it for 100 ms.
func (b *testBundle) awaitLockWait(t *testing.T) {
	t.Helper()
	var n int
	var err error
	require.Eventually(t, func() bool {
		err = b.DB.GetContext(b.Ctx, &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND COMMAND = 'Query' AND TIME_MS >= 100
			  AND INFO LIKE '%t_order%' AND (INFO LIKE '%UPDATE `+"`t_order`"+` %' OR INFO LIKE '%FOR UPDATE')`)
		return err == nil && n > 0
	}, 10*time.Second, 20*time.Millisecond, "the close never waited for the order's row (last error: %v)", err)
}

// TestSoftDeleteRacingTheCloseWins: the scan (or the first look of
// CloseOrder and CloseOrders) reads the order live; the shop's delete then
// holds its row until the close's claim (the guarded close's status CAS,
// the checked close's locking read) waits for it, and commits. Whatever the
// entry point, the claim sees the delete: the order stays unclosed and
// nothing is given back.
func TestSoftDeleteRacingTheCloseWins(t *testing.T) {
	t.Parallel()
	entries := map[string]func(b *testBundle) (orders.Outcome, error){
		"run": func(b *testBundle) (orders.Outcome, error) {
			st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
			if err == nil && (st.Scanned != 1 || st.SkippedClosed != 1) {
				err = fmt.Errorf("run: want 1 scanned and skipped as closed: %s (skipped_closed=%d)", st, st.SkippedClosed)
			}
			return orders.OutcomeSkippedClosed, err
		},
		"batch": func(b *testBundle) (orders.Outcome, error) {
			res, err := b.Closer.CloseOrders(b.Ctx, []string{"RACE"})
			if err != nil {
				return 0, err
			}
			return res[0].Outcome, res[0].Err
		},
		"single": func(b *testBundle) (orders.Outcome, error) { return b.Closer.CloseOrder(b.Ctx, "RACE") },
	}
	for _, sh := range softDeleteShops {
		for entry, closeIt := range entries {
			t.Run(sh.name+"/"+entry, func(t *testing.T) {
				t.Parallel()
				b := softDeleteSetup(t, sh, orders.CloserConfig{})
				b.placeSoftDeleted(t, sh, "RACE", 301, due, false)
				base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
				require.NoError(t, err)

				commit := b.holdDelete(t, sh, "RACE")
				type result struct {
					out orders.Outcome
					err error
				}
				done := make(chan result, 1)
				go func() {
					out, err := closeIt(b)
					done <- result{out, err}
				}()
				b.awaitLockWait(t)
				commit()
				r := <-done
				require.NoError(t, r.err)
				require.Equal(t, orders.OutcomeSkippedClosed, r.out)
				require.Equal(t, ordertest.ForeignUnpaid, b.foreignStatus(t, "RACE"))
				require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
				require.Equal(t, 1, b.DB.Count(t, `SELECT use_status FROM t_coupon_history WHERE coupon_id = 301`))
				require.Zero(t, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))
				require.Empty(t, b.letters(t), "a deleted order is no failure")
			})
		}
	}
}

// TestSoftDeleteDuringThePaymentStep: with the payment step, an order
// deleted while its trade is being closed is not closed locally, and an
// order already deleted is never sent to the payment side.
func TestSoftDeleteDuringThePaymentStep(t *testing.T) {
	t.Parallel()
	for _, sh := range softDeleteShops {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			var b *testBundle
			var calls atomic.Int64
			trade := tradeFunc(func(ctx context.Context, orderNo string) (orders.TradeResult, error) {
				calls.Add(1)
				if orderNo == "PAY-RACE" {
					// The shop deletes the order while its trade is being
					// closed, after the scan and the payment step's re-read.
					if _, err := b.DB.ExecContext(ctx, "UPDATE t_order SET "+sh.delete+" WHERE order_sn = ?", orderNo); err != nil {
						return 0, err
					}
				}
				return orders.TradeClosed, nil
			})
			b = softDeleteSetup(t, sh, orders.CloserConfig{TradeCloser: trade})
			b.placeSoftDeleted(t, sh, "PAY-RACE", 401, due, false)
			b.placeSoftDeleted(t, sh, "PAY-LIVE", 402, due, false)
			b.placeSoftDeleted(t, sh, "PAY-GONE", 403, due, true)
			base, err := ordertest.SnapshotForeign(b.Ctx, b.DB)
			require.NoError(t, err)

			res, err := b.Closer.CloseOrders(b.Ctx, []string{"PAY-RACE", "PAY-LIVE", "PAY-GONE"})
			require.NoError(t, err)
			require.Equal(t, []orders.Outcome{orders.OutcomeSkippedClosed, orders.OutcomeClosed, orders.OutcomeSkippedClosed}, outcomes(res))
			require.Equal(t, int64(2), calls.Load(), "the deleted order's trade is never closed")
			require.Equal(t, ordertest.ForeignUnpaid, b.foreignStatus(t, "PAY-RACE"))
			require.Equal(t, ordertest.ForeignCancelled, b.foreignStatus(t, "PAY-LIVE"))
			// PAY-RACE, deleted at the baseline's end, still counts as held
			// by the baseline: nothing of it may have been given back.
			require.NoError(t, ordertest.CheckForeign(b.Ctx, b.DB, base, ordertest.LockedOnly))
			require.Equal(t, 1, b.DB.Count(t, `SELECT COUNT(*) FROM order_close_log`))

			out, err := b.Closer.CloseOrder(b.Ctx, "PAY-GONE")
			require.NoError(t, err)
			require.Equal(t, orders.OutcomeSkippedClosed, out)
			require.Equal(t, int64(2), calls.Load())
		})
	}
}

// TestSoftDeletedRowsStayInTheScanRange measures what deleted unpaid
// orders cost the scan: they keep their unpaid status, so they stay in
// the scan index's range and every run walks them (each index entry and
// its row, looked up by primary key to read the flag), whether or not
// anything is left to close. Counted with the session's Handler_read_* status on a
// one-connection pool, 1,000 live due orders among 50,000 deleted ones.
func TestSoftDeletedRowsStayInTheScanRange(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("fills 51,000 orders")
	}
	const deleted, live, pageSize = 50000, 1000, 500
	sh := softDeleteShops[0]
	b := softDeleteSetup(t, sh, orders.CloserConfig{})
	// Deleted ones first by creation time, so that every page but the
	// last walks past them; the live ones after.
	_, err := b.DB.ExecContext(b.Ctx, fmt.Sprintf(`INSERT INTO t_order (order_sn, member_id, order_status, created_at, is_deleted)
		SELECT CONCAT('SD', seq), 1, 0, NOW(3) - INTERVAL 2 DAY + INTERVAL seq SECOND, IF(seq <= %d, 1, 0)
		FROM seq_1_to_%d`, deleted, deleted+live))
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `ANALYZE TABLE t_order`)
	require.NoError(t, err)

	one := oneConn(t, b.DB.DSN)
	cfg := orders.CloserConfig{Schema: ordertest.ForeignSchema(ordertest.LockedOnly)}
	cfg.Schema.Orders.SoftDelete = sh.decl
	c, err := orders.NewCloser(one, b.Locker, cfg)
	require.NoError(t, err)
	run := func(opt orders.RunOptions) (orders.RunStats, int) {
		before := handlerReads(t, one)
		st, err := c.Run(b.Ctx, opt)
		require.NoError(t, err)
		return st, handlerReads(t, one) - before
	}

	dry, dryReads := run(orders.RunOptions{DryRun: true, PageSize: pageSize})
	require.Equal(t, live, dry.Scanned)
	st, _ := run(orders.RunOptions{PageSize: pageSize})
	require.Equal(t, live, st.Closed, st.String())
	empty, emptyReads := run(orders.RunOptions{PageSize: pageSize})
	require.Zero(t, empty.Scanned)
	t.Logf("dry run over %d live among %d deleted: %d pages, %d handler reads, %s; closing run: %s; "+
		"run with nothing left: %d handler reads, %s",
		live, deleted, dry.Pages, dryReads, dry.Elapsed.Round(time.Millisecond), st.Elapsed.Round(time.Millisecond),
		emptyReads, empty.Elapsed.Round(time.Millisecond))
	// Every deleted row is walked, by every run: one handler read per
	// index entry (InnoDB looks its row up by primary key inside it, to
	// read the flag), a few per page besides.
	require.GreaterOrEqual(t, emptyReads, deleted)
	require.LessOrEqual(t, emptyReads, deleted+10*empty.Pages+20)
	require.GreaterOrEqual(t, dryReads, deleted+live)
}
