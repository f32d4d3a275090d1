package orders_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// BenchmarkCloseRunObserved is BenchmarkCloseRun with the Prometheus
// observer on the closer and the locker, as serve runs it: compare the two
// for the hooks' cost (per page, plus one histogram observation per order).
func BenchmarkCloseRunObserved(b *testing.B) {
	ctx := context.Background()
	db := dbtest.New(b)
	rdb, prefix := redistest.Client(b)
	obs := metrics.New(metrics.Config{}).Orders()
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix, Observer: obs})
	require.NoError(b, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{Observer: obs})
	require.NoError(b, err)
	_, err = orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: b.N, DueFraction: 1, CouponFraction: 0.3})
	require.NoError(b, err)

	b.ResetTimer()
	st, err := closer.Run(ctx, orders.RunOptions{})
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, st.Closed)
	b.ReportMetric(float64(st.Closed)/st.Elapsed.Seconds(), "orders/s")
}
