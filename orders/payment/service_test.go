package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

func TestPlaceOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	base := b.Snapshot(t)
	b.Place(t, "P1", true, payment.Item{SKUID: 1, Quantity: 2}, payment.Item{SKUID: 3, Quantity: 1}, payment.Item{SKUID: 1, Quantity: 1})
	a, l := b.stock(t, 1)
	require.Equal(t, [2]int64{97, 3}, [2]int64{a, l})
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 1 AND order_no = 'P1'`))
	b.Check(t, base)

	_, err := b.Svc.PlaceOrder(b.Ctx, payment.NewOrder{OrderNo: "P2", Items: []payment.Item{{SKUID: 2, Quantity: 101}}})
	require.ErrorIs(t, err, payment.ErrOutOfStock)
	_, err = b.Svc.PlaceOrder(b.Ctx, payment.NewOrder{OrderNo: "P3", Items: []payment.Item{{SKUID: 99, Quantity: 1}}})
	require.ErrorIs(t, err, payment.ErrOutOfStock, "unknown sku")
	var used int64
	require.NoError(t, b.DB.GetContext(b.Ctx, &used, `SELECT id FROM user_coupon WHERE order_no = 'P1'`))
	_, err = b.Svc.PlaceOrder(b.Ctx, payment.NewOrder{OrderNo: "P4", CouponID: used, Items: []payment.Item{{SKUID: 2, Quantity: 1}}})
	require.ErrorIs(t, err, payment.ErrCouponUnavailable)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_info`), "failed orders leave nothing behind")
	b.Check(t, base)
}

func TestPay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	base := b.Snapshot(t)
	b.Place(t, "A", true, payment.Item{SKUID: 1, Quantity: 2}, payment.Item{SKUID: 2, Quantity: 1})
	b.Place(t, "B", false, payment.Item{SKUID: 1, Quantity: 1})

	out, err := b.Svc.Pay(b.Ctx, "A")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)
	a, l := b.stock(t, 1)
	require.Equal(t, [2]int64{97, 1}, [2]int64{a, l}, "A's 2 units consumed, B's 1 still locked")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM user_coupon WHERE status = 2 AND order_no = 'A'`))
	out, err = b.Svc.Pay(b.Ctx, "A")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, out)

	late := b.lateCloser(t, 31*time.Minute, orders.CloserConfig{})
	oc, err := late.CloseOrder(b.Ctx, "B")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, oc)
	out, err = b.Svc.Pay(b.Ctx, "B")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyClosed, out)

	_, err = b.Svc.Pay(b.Ctx, "NOPE")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)
	require.Zero(t, b.RedisKeys(t), "payment locks released")
	b.Check(t, base)
}
