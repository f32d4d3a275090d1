package orders_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// offlineService is an order service whose Redis does not answer (a port
// nothing listens on): its Pay goes on under the row lock and the status
// CAS, so it can pay an order while a close holds the order's Redis lock.
func offlineService(t *testing.T, b *testBundle) *payment.Service {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	locker, err := orderlock.New(orderlock.Config{Client: rdb})
	require.NoError(t, err)
	svc, err := payment.NewService(b.DB.DB, locker, payment.ServiceConfig{})
	require.NoError(t, err)
	return svc
}

// A page closes with writes only, trusting what its read without locks
// saw; when orders changed after that read, under the page's Redis locks
// (paid by a service that could not reach Redis, a deadline raised by an
// operator), the status CAS changes fewer rows than the page has, and the
// page is closed again with its orders read under lock: the changed ones
// are skipped, the others closed, and nothing is given back twice. The
// payment step runs between the lock and the close transaction, so it is
// where the test changes them.
func TestOrdersChangedAfterTheirReadAreSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	offline := offlineService(t, b)
	var change func(no string)
	trade := tradeFunc(func(_ context.Context, no string) (orders.TradeResult, error) {
		change(no)
		return orders.TradeClosed, nil
	})
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{TradeCloser: trade})
	for _, no := range []string{"RUN-PAID", "RUN-LATER", "RUN-OK", "PAID", "PAID-OK", "LATER", "LATER-OK"} {
		b.Place(t, no, true, payment.Item{SKUID: 2, Quantity: 1}, payment.Item{SKUID: 3, Quantity: 2})
	}
	base := b.Snapshot(t)
	change = func(no string) {
		switch no {
		case "RUN-PAID", "PAID":
			out, err := offline.Pay(b.Ctx, no)
			require.NoError(t, err)
			require.Equal(t, payment.Paid, out)
		case "RUN-LATER", "LATER":
			_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET timeout_minutes = 120 WHERE order_no = ?`, no)
			require.NoError(t, err)
		}
	}

	// Each change alone in a batch, so that each guard of the CAS is the
	// one that must notice it.
	for _, batch := range [][]string{{"PAID", "PAID-OK"}, {"LATER", "LATER-OK"}} {
		outs, err := late.CloseOrders(b.Ctx, batch)
		require.NoError(t, err)
		want := orders.OutcomeSkippedPaid
		if batch[0] == "LATER" {
			want = orders.OutcomeNotDue
		}
		require.Equal(t, []orders.Outcome{want, orders.OutcomeClosed}, []orders.Outcome{outs[0].Outcome, outs[1].Outcome}, batch[0])
	}
	st, err := late.Run(b.Ctx, orders.RunOptions{PageSize: 1})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, "RUN-OK: %s", st)
	require.Equal(t, 1, st.SkippedPaid)
	require.Equal(t, 1, st.SkippedNotDue)
	for no, want := range map[string]int{"RUN-PAID": 1, "RUN-LATER": 0, "RUN-OK": 2, "PAID": 1, "PAID-OK": 2, "LATER": 0, "LATER-OK": 2} {
		require.Equal(t, want, b.Count(t, `SELECT status FROM order_info WHERE order_no = ?`, no), no)
	}
	b.Check(t, base)
	require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
}

// The sweep leaves alone the orders whose close letter is parked or waits
// for its retry time, and resolves the waiting letters of the orders it
// closes, both when the open letters are few enough to be read at once and
// when there are more of them than a page has orders (each page's orders
// probed instead). Orders without a letter cost their close no statement
// about letters.
func TestSweepHonoursLettersFewOrMany(t *testing.T) {
	t.Parallel()
	for _, many := range []bool{false, true} {
		name := "few"
		if many {
			name = "many"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.Shop(t)
			late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{})
			for _, no := range []string{"L-PARKED", "L-LATER", "L-DUE", "L-NONE", "L-RESOLVED"} {
				b.Place(t, no, false, payment.Item{SKUID: 1, Quantity: 1})
			}
			letters := [][2]string{{"L-PARKED", "parked"}, {"L-LATER", "later"}, {"L-DUE", "due"}, {"L-RESOLVED", "resolved"}}
			if many {
				// Open letters of orders long gone: more than a page.
				for i := range 12 {
					letters = append(letters, [2]string{fmt.Sprintf("GONE-%d", i), "parked"})
				}
			}
			for _, l := range letters {
				status, retry := l[1], "NOW(3) + INTERVAL 31 MINUTE - INTERVAL 1 SECOND"
				switch l[1] {
				case "later":
					status, retry = "waiting", "NOW(3) + INTERVAL 2 HOUR"
				case "due":
					status = "waiting"
				}
				_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, next_retry_at)
					VALUES (?, 'close', ?, 'boom', `+retry+`)`, l[0], status)
				require.NoError(t, err)
			}
			st, err := late.Run(b.Ctx, orders.RunOptions{PageSize: 3})
			require.NoError(t, err)
			require.Equal(t, 3, st.Closed, "L-DUE, L-NONE, L-RESOLVED: %s", st)
			for no, want := range map[string]int{"L-PARKED": 0, "L-LATER": 0, "L-DUE": 2, "L-NONE": 2, "L-RESOLVED": 2} {
				require.Equal(t, want, b.Count(t, `SELECT status FROM order_info WHERE order_no = ?`, no), no)
			}
			got := b.deadLetters(t)
			require.Equal(t, "resolved", got["L-DUE"].Status, "closed, so its letter is resolved")
			require.Equal(t, "parked", got["L-PARKED"].Status)
			require.Equal(t, "waiting", got["L-LATER"].Status)
		})
	}
}

// One page, both ways a guarded close fails: an order paid after the page
// read it (under the page's locks, by a service that could not reach
// Redis), and an order whose locked stock is short of what it holds. The
// guarded close rolls back, the checked close skips the paid order and sets
// the short one aside, which alone is dead-lettered in a transaction of its
// own; the rest of the page closes, each order once, and nothing is given
// back for the paid or the short order. Both as a page of Run and as a
// batch of CloseOrders.
func TestGuardedCloseFallsBackForPaidAndShortOrders(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "run", true: "batch"}[batch], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.Shop(t)
			offline := offlineService(t, b)
			trade := tradeFunc(func(_ context.Context, no string) (orders.TradeResult, error) {
				if no == "LATE-PAID" {
					out, err := offline.Pay(b.Ctx, no)
					require.NoError(t, err)
					require.Equal(t, payment.Paid, out)
				}
				return orders.TradeClosed, nil
			})
			late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{TradeCloser: trade})
			nos := []string{"OK-1", "LATE-PAID", "SHORT", "OK-2", "OK-3"}
			for _, no := range nos {
				items := []payment.Item{{SKUID: 2, Quantity: 1}, {SKUID: 3, Quantity: 2}}
				if no == "SHORT" {
					items = []payment.Item{{SKUID: 2, Quantity: 1}, {SKUID: 4, Quantity: 2}}
				}
				b.Place(t, no, true, items...)
			}
			// SHORT alone holds SKU 4; its locked stock is one unit short.
			_, err := b.DB.ExecContext(b.Ctx, `UPDATE inventory SET locked = locked - 1 WHERE sku_id = 4`)
			require.NoError(t, err)
			base := b.Snapshot(t)

			if batch {
				outs, err := late.CloseOrders(b.Ctx, nos)
				require.NoError(t, err)
				require.Equal(t, names([]orders.Outcome{orders.OutcomeClosed, orders.OutcomeSkippedPaid, orders.OutcomeDeadLettered,
					orders.OutcomeClosed, orders.OutcomeClosed}), names(outs))
			} else {
				st, err := late.Run(b.Ctx, orders.RunOptions{})
				require.NoError(t, err)
				require.Equal(t, 3, st.Closed, "%s", st)
				require.Equal(t, 1, st.SkippedPaid)
				require.Equal(t, 1, st.DeadLettered)
			}
			for no, want := range map[string]int{"OK-1": 2, "LATE-PAID": 1, "SHORT": 0, "OK-2": 2, "OK-3": 2} {
				require.Equal(t, want, b.Count(t, `SELECT status FROM order_info WHERE order_no = ?`, no), no)
			}
			require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM order_close_log`), "OK-1, OK-2, OK-3, once each")
			dls := b.deadLetters(t)
			require.Len(t, dls, 1)
			require.Contains(t, dls["SHORT"].LastError, "locked stock of sku 4")
			require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM user_coupon WHERE order_no = 'SHORT' AND status = 1`),
				"the short order's coupon stays locked")
			// Only the planted shortfall remains: stock and coupons were
			// given back for the three closed orders and no others.
			var ve *ordertest.ViolationsError
			require.True(t, errors.As(ordertest.Check(b.Ctx, b.DB, base), &ve))
			require.Equal(t, []string{"stock_locked"}, ve.Rules())
			require.Len(t, ve.Violations, 1)
			require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
		})
	}
}
