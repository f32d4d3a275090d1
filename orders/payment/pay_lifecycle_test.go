package payment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/payment"
)

// A payment callback repeated after the order shipped or completed is a
// repeat, not a late payment: no refund is recorded.
func TestPayRepeatedAfterShipping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "S", false, payment.Item{SKUID: 1, Quantity: 1})
	out, err := b.Svc.Pay(b.Ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)

	ok, err := b.Svc.Ship(b.Ctx, "S")
	require.NoError(t, err)
	require.True(t, ok)
	out, err = b.Svc.Pay(b.Ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, out, "shipped")

	ok, err = b.Svc.Confirm(b.Ctx, "S")
	require.NoError(t, err)
	require.True(t, ok)
	out, err = b.Svc.Pay(b.Ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, out, "completed")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM payment_conflict`), "no refund owed")
}
