package payment_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

func TestLatePaymentRecordedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "LP1", true, payment.Item{SKUID: 1, Quantity: 2})
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET pay_amount = 129.90 WHERE order_no = 'LP1'`)
	require.NoError(t, err)
	base := b.Snapshot(t)
	late := b.lateCloser(t, 31*time.Minute, orders.CloserConfig{})
	out, err := late.CloseOrder(b.Ctx, "LP1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)

	dbNow := b.DB.Now(t)
	for range 3 { // the payment side repeats its notification
		pay, err := b.Svc.Pay(b.Ctx, "LP1")
		require.NoError(t, err)
		require.Equal(t, payment.AlreadyClosed, pay)
	}
	var rows []struct {
		OrderNo   string    `db:"order_no"`
		PayAmount string    `db:"pay_amount"`
		PaidAt    time.Time `db:"paid_at"`
		CreatedAt time.Time `db:"created_at"`
	}
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT order_no, pay_amount, paid_at, created_at FROM payment_conflict`))
	require.Len(t, rows, 1, "one row however often the payment is reported")
	require.Equal(t, "LP1", rows[0].OrderNo)
	require.Equal(t, "129.90", rows[0].PayAmount)
	require.WithinDuration(t, dbNow, rows[0].PaidAt, time.Minute, "database clock")
	require.Equal(t, 2, b.Count(t, `SELECT status FROM order_info WHERE order_no = 'LP1'`), "still closed")
	b.Check(t, base)
	require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
}

// Payments race the close job over thousands of orders, some reported two
// or three times: every order ends paid or closed, consistent with its
// stock and coupon, and every payment that lost to the close is recorded in
// payment_conflict exactly once, for exactly those orders.
func TestLatePaymentRacesClose(t *testing.T) {
	t.Parallel()
	for _, mode := range []orders.CompensationMode{orders.CompensateLocal, orders.CompensateOutbox} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, paytest.WithCloser(orders.CloserConfig{Compensation: mode}))
			res, base := b.Seed(t, orderdemo.Spec{Orders: 2000, DueFraction: 1, CouponFraction: 0.5})
			_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET pay_amount = (id % 997) + 0.25`)
			require.NoError(t, err)
			nos := b.ShuffledOrderNos(t)

			var mu sync.Mutex
			first := map[string]payment.Outcome{} // outcome of each order's first notification
			var g errgroup.Group
			var st orders.RunStats
			g.Go(func() error {
				var err error
				// Paced to last about as long as the payers, so both sides
				// win a fair share.
				st, err = b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 20, MaxPerSecond: 400})
				return err
			})
			const payers = 4
			for w := range payers {
				g.Go(func() error {
					for i := w; i < len(nos); i += payers {
						no := nos[i]
						for n := range 1 + i%3 { // 1, 2 or 3 notifications
							out, err := b.Svc.Pay(b.Ctx, no)
							if err != nil {
								return err
							}
							mu.Lock()
							prev, seen := first[no]
							if !seen {
								first[no] = out
							}
							mu.Unlock()
							switch {
							case !seen && out != payment.Paid && out != payment.AlreadyClosed:
								return fmt.Errorf("order %s: first notification %v", no, out)
							case seen && prev == payment.Paid && out != payment.AlreadyPaid:
								return fmt.Errorf("order %s: notification %d after paid: %v", no, n+1, out)
							case seen && prev == payment.AlreadyClosed && out != payment.AlreadyClosed:
								return fmt.Errorf("order %s: notification %d after closed: %v", no, n+1, out)
							}
						}
					}
					return nil
				})
			}
			require.NoError(t, g.Wait())

			var paid, lost []string
			for no, out := range first {
				if out == payment.Paid {
					paid = append(paid, no)
				} else {
					lost = append(lost, no)
				}
			}
			c := b.Counts(t)
			require.Equal(t, res.Orders, c.Paid+c.Closed, "each order ends paid or closed")
			require.Equal(t, len(paid), c.Paid)
			require.Equal(t, len(lost), c.Closed)
			require.Equal(t, st.Closed, c.Closed)
			require.Positive(t, len(lost), "the race produced late payments")
			require.Positive(t, len(paid))

			var conflicts []string
			require.NoError(t, b.DB.SelectContext(b.Ctx, &conflicts, `SELECT order_no FROM payment_conflict`))
			require.ElementsMatch(t, lost, conflicts, "every lost payment recorded once, and only those")
			require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
			if mode == orders.CompensateOutbox {
				require.NoError(t, ordertest.CheckOutbox(b.Ctx, b.DB, base, ordertest.OutboxOptions{}))
			} else {
				b.Check(t, base)
			}
			t.Logf("paid %d, closed %d (late payments recorded), close run skipped %d locked", c.Paid, c.Closed, st.SkippedLocked)
		})
	}
}
