package orders_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

func TestCloseOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	base := b.Snapshot(t)
	for _, no := range []string{"C1", "C2", "C3", "C4"} {
		b.Place(t, no, true, payment.Item{SKUID: 2, Quantity: 1}, payment.Item{SKUID: 4, Quantity: 2})
	}
	// Poisoned: SKU 6 has no stock row.
	ordertest.Order(t, b.DB.DB, ordertest.OrderOpts{OrderNo: "C5", Items: []ordertest.Item{{SKU: 6, Qty: 1, MissingStock: true}}})

	out, err := b.Closer.CloseOrder(b.Ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotDue, out)
	require.Zero(t, b.Counts(t).Closed, "not due: nothing changed")

	late := b.shiftedCloser(t, 30*time.Minute, orders.CloserConfig{})
	out, err = late.CloseOrder(b.Ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out, "due at exactly create_time + timeout")
	out, err = late.CloseOrder(b.Ctx, "C1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedClosed, out)

	_, err = b.Svc.Pay(b.Ctx, "C2")
	require.NoError(t, err)
	out, err = late.CloseOrder(b.Ctx, "C2")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedPaid, out)

	out, err = late.CloseOrder(b.Ctx, "NOPE")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeNotFound, out)

	m := b.Locker.Redsync().NewMutex(b.Locker.KeyFor("C3"))
	require.NoError(t, m.LockContext(b.Ctx))
	out, err = late.CloseOrder(b.Ctx, "C3")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedLocked, out)
	_, err = m.UnlockContext(b.Ctx)
	require.NoError(t, err)
	b.Check(t, base)

	out, err = late.CloseOrder(b.Ctx, "C5")
	require.ErrorContains(t, err, "inventory row of sku 6 is missing")
	require.Equal(t, orders.OutcomeDeadLettered, out)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = 'C5' AND status = 'waiting'`))

	out, err = late.CloseOrder(b.Ctx, "C3")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	b.Check(t, base)
}

// "Now" is the database's clock in the session time zone, the zone
// create_time is written in; the executor's own clock and zone play no part.
func TestDueUsesDatabaseClockAndZone(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"+08:00", "-08:00"} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			cfg, err := mysql.ParseDSN(b.DB.DSN)
			require.NoError(t, err)
			cfg.Params = map[string]string{"time_zone": "'" + zone + "'"}
			zdb, err := sqlx.Open("mysql", cfg.FormatDSN())
			require.NoError(t, err)
			t.Cleanup(func() { zdb.Close() })
			svc, err := payment.NewService(zdb, b.Locker, payment.ServiceConfig{})
			require.NoError(t, err)
			require.NoError(t, svc.AddStock(b.Ctx, 1, 10))
			for i := range 3 {
				_, err := svc.PlaceOrder(b.Ctx, payment.NewOrder{OrderNo: fmt.Sprintf("Z%d", i), TimeoutMinutes: 30,
					Items: []payment.Item{{SKUID: 1, Quantity: 1}}})
				require.NoError(t, err)
			}
			base := b.Snapshot(t)

			early, err := orders.NewCloser(zdb, b.Locker, orders.CloserConfig{})
			require.NoError(t, err)
			orders.ShiftClock(early, 29*time.Minute)
			st, err := early.Run(b.Ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Zero(t, st.Scanned, "29 minutes after placing, nothing is due")

			due, err := orders.NewCloser(zdb, b.Locker, orders.CloserConfig{})
			require.NoError(t, err)
			orders.ShiftClock(due, 31*time.Minute)
			st, err = due.Run(b.Ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, 3, st.Closed, "31 minutes after placing, all are due")
			b.Check(t, base)
		})
	}
}
