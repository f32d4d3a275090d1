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
)

// shop places a few orders through the service on fresh stock.
func (b *testBundle) shop(t *testing.T) {
	t.Helper()
	for sku := int64(1); sku <= 5; sku++ {
		require.NoError(t, b.svc.AddStock(b.ctx, sku, 100))
	}
}

func (b *testBundle) place(t *testing.T, no string, coupon bool, items ...orders.Item) {
	t.Helper()
	o := orders.NewOrder{OrderNo: no, UserID: 7, Items: items}
	if coupon {
		id, err := b.svc.IssueCoupon(b.ctx, 7)
		require.NoError(t, err)
		o.CouponID = id
	}
	_, err := b.svc.PlaceOrder(b.ctx, o)
	require.NoError(t, err)
}

func (b *testBundle) stock(t *testing.T, sku int64) (available, locked int64) {
	t.Helper()
	var r struct {
		A int64 `db:"available"`
		L int64 `db:"locked"`
	}
	require.NoError(t, b.db.GetContext(b.ctx, &r, `SELECT available, locked FROM inventory WHERE sku_id = ?`, sku))
	return r.A, r.L
}

func TestPlaceOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	base := snapshot(t, b)
	b.place(t, "P1", true, orders.Item{SKUID: 1, Quantity: 2}, orders.Item{SKUID: 3, Quantity: 1}, orders.Item{SKUID: 1, Quantity: 1})
	a, l := b.stock(t, 1)
	require.Equal(t, [2]int64{97, 3}, [2]int64{a, l})
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 1 AND order_no = 'P1'`))
	b.check(t, base)

	_, err := b.svc.PlaceOrder(b.ctx, orders.NewOrder{OrderNo: "P2", Items: []orders.Item{{SKUID: 2, Quantity: 101}}})
	require.ErrorIs(t, err, orders.ErrOutOfStock)
	_, err = b.svc.PlaceOrder(b.ctx, orders.NewOrder{OrderNo: "P3", Items: []orders.Item{{SKUID: 99, Quantity: 1}}})
	require.ErrorIs(t, err, orders.ErrOutOfStock, "unknown sku")
	var used int64
	require.NoError(t, b.db.GetContext(b.ctx, &used, `SELECT id FROM user_coupon WHERE order_no = 'P1'`))
	_, err = b.svc.PlaceOrder(b.ctx, orders.NewOrder{OrderNo: "P4", CouponID: used, Items: []orders.Item{{SKUID: 2, Quantity: 1}}})
	require.ErrorIs(t, err, orders.ErrCouponUnavailable)
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM order_info`), "failed orders leave nothing behind")
	b.check(t, base)
}

func TestPay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	base := snapshot(t, b)
	b.place(t, "A", true, orders.Item{SKUID: 1, Quantity: 2}, orders.Item{SKUID: 2, Quantity: 1})
	b.place(t, "B", false, orders.Item{SKUID: 1, Quantity: 1})

	out, err := b.svc.Pay(b.ctx, "A")
	require.NoError(t, err)
	require.Equal(t, orders.PayPaid, out)
	a, l := b.stock(t, 1)
	require.Equal(t, [2]int64{97, 1}, [2]int64{a, l}, "A's 2 units consumed, B's 1 still locked")
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 2 AND order_no = 'A'`))
	out, err = b.svc.Pay(b.ctx, "A")
	require.NoError(t, err)
	require.Equal(t, orders.PayAlreadyPaid, out)

	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{})
	oc, err := late.CloseOrder(b.ctx, "B")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, oc)
	out, err = b.svc.Pay(b.ctx, "B")
	require.NoError(t, err)
	require.Equal(t, orders.PayAlreadyClosed, out)

	_, err = b.svc.Pay(b.ctx, "NOPE")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)
	require.Zero(t, b.redisKeys(t), "payment locks released")
	b.check(t, base)
}

func TestCloseOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	base := snapshot(t, b)
	for _, no := range []string{"C1", "C2", "C3", "C4"} {
		b.place(t, no, true, orders.Item{SKUID: 2, Quantity: 1}, orders.Item{SKUID: 4, Quantity: 2})
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
			svc, err := orders.NewService(zdb, b.locker, orders.ServiceConfig{})
			require.NoError(t, err)
			require.NoError(t, svc.AddStock(b.ctx, 1, 10))
			for i := range 3 {
				_, err := svc.PlaceOrder(b.ctx, orders.NewOrder{OrderNo: fmt.Sprintf("Z%d", i), TimeoutMinutes: 30,
					Items: []orders.Item{{SKUID: 1, Quantity: 1}}})
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
