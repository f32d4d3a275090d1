package payment_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

// orderStates reads every order's state, by order number.
func (b *testBundle) orderStates(t *testing.T) map[string]ordertest.OrderState {
	t.Helper()
	s, err := ordertest.States(b.Ctx, b.DB)
	require.NoError(t, err)
	return s
}

// Ship and Confirm: CAS steps, idempotent, with clear errors; Pay stamps
// pay_time.
func TestShipAndConfirm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.Svc.AddStock(b.Ctx, 1, 100))
	b.Place(t, "L-1", true, payment.Item{SKUID: 1, Quantity: 2})
	b.Place(t, "L-2", false, payment.Item{SKUID: 1, Quantity: 1})
	base := b.Snapshot(t)

	_, err := b.Svc.Ship(b.Ctx, "L-1")
	require.ErrorIs(t, err, payment.ErrOrderState, "unpaid")
	require.ErrorContains(t, err, "status 0")
	_, err = b.Svc.Ship(b.Ctx, "NOPE")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)

	out, err := b.Svc.Pay(b.Ctx, "L-1")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)
	o := b.orderStates(t)["L-1"]
	require.NotNil(t, o.PayTime, "Pay stamps pay_time")
	require.WithinDuration(t, b.DB.Now(t), *o.PayTime, time.Minute)
	require.Nil(t, b.orderStates(t)["L-2"].PayTime)

	_, err = b.Svc.Confirm(b.Ctx, "L-1")
	require.ErrorIs(t, err, payment.ErrOrderState, "not shipped yet")
	ok, err := b.Svc.Ship(b.Ctx, "L-1")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.Svc.Ship(b.Ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok, "shipping twice is a no-op")
	ok, err = b.Svc.Confirm(b.Ctx, "L-1")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.Svc.Confirm(b.Ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = b.Svc.Ship(b.Ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok, "a completed order counts as shipped")
	o = b.orderStates(t)["L-1"]
	require.Equal(t, 4, o.Status)
	require.NotNil(t, o.ShipTime)
	require.NotNil(t, o.CompleteTime)
	_, err = b.Svc.Confirm(b.Ctx, "NOPE")
	require.True(t, errors.Is(err, orders.ErrOrderNotFound))
	b.Check(t, base)
}
