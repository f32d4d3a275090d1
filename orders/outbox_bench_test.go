package orders_test

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
)

// BenchmarkCloseRunOutbox is BenchmarkCloseRun in outbox mode: one
// multi-row outbox INSERT per page instead of the stock and coupon UPDATEs.
func BenchmarkCloseRunOutbox(b *testing.B) {
	ctx := context.Background()
	db := dbtest.New(b)
	rdb, prefix := redistest.Client(b)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(b, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{Compensation: orders.CompensateOutbox})
	require.NoError(b, err)
	_, err = orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: b.N, DueFraction: 1, CouponFraction: 0.3})
	require.NoError(b, err)
	base, err := ordertest.Snapshot(ctx, db)
	require.NoError(b, err)

	b.ResetTimer()
	st, err := closer.Run(ctx, orders.RunOptions{})
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, st.Closed)
	b.ReportMetric(float64(st.Closed)/st.Elapsed.Seconds(), "orders/s")
	require.NoError(b, ordertest.CheckOutbox(ctx, db, base, ordertest.OutboxOptions{}))
}
