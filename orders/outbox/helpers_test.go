package outbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/outbox"
)

// testBundle is paytest's bundle whose due orders its Closer, in outbox
// mode, has closed: the events the relays deliver are the ones the close
// wrote.
type testBundle struct{ *paytest.Bundle }

// closedInOutbox closes the due orders of fresh demo data in outbox mode.
func closedInOutbox(t *testing.T, orderCount int) (*testBundle, *ordertest.Baseline) {
	t.Helper()
	b := &testBundle{paytest.Setup(t, paytest.WithCloser(orders.CloserConfig{Compensation: orders.CompensateOutbox}))}
	_, base := b.Seed(t, orderdemo.Spec{Orders: orderCount, DueFraction: 1, CouponFraction: 0.5, SKUs: 50})
	st, err := b.Closer.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, orderCount, st.Closed)
	return b, base
}

// events reads every row of order_outbox, in id order.
func (b *testBundle) events(t *testing.T) []outbox.Event {
	t.Helper()
	var evs []outbox.Event
	require.NoError(t, b.DB.SelectContext(b.Ctx, &evs, `SELECT id, event_type, order_no, payload, trace_id, status, attempts,
		next_attempt_at, last_error, park_reason, parked_at, created_at, delivered_at FROM order_outbox ORDER BY id`))
	return evs
}
