package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/outbox"
)

// testBundle is a fresh database whose due orders a Closer in outbox mode
// has closed: the events the relays deliver are the ones the close wrote.
type testBundle struct {
	ctx context.Context
	db  *dbtest.DB
}

// closedInOutbox closes the due orders of fresh demo data in outbox mode.
func closedInOutbox(t *testing.T, orderCount int) (*testBundle, *ordertest.Baseline) {
	t.Helper()
	b := &testBundle{ctx: context.Background(), db: dbtest.New(t)}
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(b.db.DB, locker, orders.CloserConfig{Compensation: orders.CompensateOutbox})
	require.NoError(t, err)
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: orderCount, DueFraction: 1, CouponFraction: 0.5, SKUs: 50})
	require.NoError(t, err)
	base, err := ordertest.Snapshot(b.ctx, b.db)
	require.NoError(t, err)
	st, err := closer.Run(b.ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, orderCount, st.Closed)
	return b, base
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return b.db.Count(t, query, args...)
}

// events reads every row of order_outbox, in id order.
func (b *testBundle) events(t *testing.T) []outbox.Event {
	t.Helper()
	var evs []outbox.Event
	require.NoError(t, b.db.SelectContext(b.ctx, &evs, `SELECT id, event_type, order_no, payload, trace_id, status, attempts,
		next_attempt_at, last_error, park_reason, parked_at, created_at, delivered_at FROM order_outbox ORDER BY id`))
	return evs
}
