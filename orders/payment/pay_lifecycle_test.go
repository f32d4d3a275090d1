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
	b.shop(t)
	b.place(t, "S", false, payment.Item{SKUID: 1, Quantity: 1})
	out, err := b.svc.Pay(b.ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)

	ok, err := b.svc.Ship(b.ctx, "S")
	require.NoError(t, err)
	require.True(t, ok)
	out, err = b.svc.Pay(b.ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, out, "shipped")

	ok, err = b.svc.Confirm(b.ctx, "S")
	require.NoError(t, err)
	require.True(t, ok)
	out, err = b.svc.Pay(b.ctx, "S")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, out, "completed")
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM payment_conflict`), "no refund owed")
}
