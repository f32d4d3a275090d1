package orders_test

import (
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

// shop stocks SKUs 1-5 (paytest.Shop).
func (b *testBundle) shop(t *testing.T) { paytest.Shop(t, b.svc) }

// place places an order through the service (paytest.Place).
func (b *testBundle) place(t *testing.T, no string, coupon bool, items ...payment.Item) {
	paytest.Place(t, b.svc, no, coupon, items...)
}

func TestCloseOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	base := snapshot(t, b)
	for _, no := range []string{"C1", "C2", "C3", "C4"} {
		b.place(t, no, true, payment.Item{SKUID: 2, Quantity: 1}, payment.Item{SKUID: 4, Quantity: 2})
	}
	// Poisoned: SKU 6 has no stock row.
	ordertest.Order(t, b.db.DB, ordertest.OrderOpts{OrderNo: "C5", Items: []ordertest.Item{{SKU: 6, Qty: 1, MissingStock: true}}})

	out, err := b.closer.CloseOrder(b.ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, out)
	require.Zero(t, b.counts(t).Closed, "not due: nothing changed")

	late := b.shiftedCloser(t, 30*time.Minute, orders.CloserConfig{})
	out, err = late.CloseOrder(b.ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out, "due at exactly create_time + timeout")
	out, err = late.CloseOrder(b.ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedClosed, out)

	_, err = b.svc.Pay(b.ctx, "C2")
	require.NoError(t, err)
	out, err = late.CloseOrder(b.ctx, "C2")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedPaid, out)

	out, err = late.CloseOrder(b.ctx, "NOPE")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotFound, out)

	m := b.locker.Redsync().NewMutex(b.locker.KeyFor("C3"))
	require.NoError(t, m.LockContext(b.ctx))
	out, err = late.CloseOrder(b.ctx, "C3")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedLocked, out)
	_, err = m.UnlockContext(b.ctx)
	require.NoError(t, err)
	b.check(t, base)

	out, err = late.CloseOrder(b.ctx, "C5")
	require.ErrorContains(t, err, "inventory row of sku 6 is missing")
	require.Equal(t, orders.OutcomeDeadLettered, out)
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = 'C5' AND status = 'waiting'`))

	out, err = late.CloseOrder(b.ctx, "C3")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	b.check(t, base)
}

// "Now" is the database's clock in the session time zone, the zone
// create_time is written in; the executor's own clock and zone play no part.
func TestDueUsesDatabaseClockAndZone(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"+08:00", "-08:00"} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			cfg, err := mysql.ParseDSN(b.db.DSN)
			require.NoError(t, err)
			cfg.Params = map[string]string{"time_zone": "'" + zone + "'"}
			zdb, err := sqlx.Open("mysql", cfg.FormatDSN())
			require.NoError(t, err)
			t.Cleanup(func() { zdb.Close() })
			svc, err := payment.NewService(zdb, b.locker, payment.ServiceConfig{})
			require.NoError(t, err)
			require.NoError(t, svc.AddStock(b.ctx, 1, 10))
			for i := range 3 {
				_, err := svc.PlaceOrder(b.ctx, payment.NewOrder{OrderNo: fmt.Sprintf("Z%d", i), TimeoutMinutes: 30,
					Items: []payment.Item{{SKUID: 1, Quantity: 1}}})
				require.NoError(t, err)
			}
			base := snapshot(t, b)

			early, err := orders.NewCloser(zdb, b.locker, orders.CloserConfig{})
			require.NoError(t, err)
			orders.ShiftClock(early, 29*time.Minute)
			st, err := early.Run(b.ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Zero(t, st.Scanned, "29 minutes after placing, nothing is due")

			due, err := orders.NewCloser(zdb, b.locker, orders.CloserConfig{})
			require.NoError(t, err)
			orders.ShiftClock(due, 31*time.Minute)
			st, err = due.Run(b.ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, 3, st.Closed, "31 minutes after placing, all are due")
			b.check(t, base)
		})
	}
}
