package orders_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
)

// BenchmarkCloseRun closes b.N due orders (1-3 items over 10,000 SKUs, 30%
// with a coupon) with one Run and reports orders/s. `go run ./cmd/bench
// close` compares it with the baselines on larger tables.
func BenchmarkCloseRun(b *testing.B) {
	pb, base := benchClose(b)
	require.NoError(b, ordertest.Check(pb.Ctx, pb.DB, base))
}

// benchClose builds a bundle with opts, generates b.N due orders (1-3
// items over 10,000 SKUs, 30% with a coupon) and times one Run of its
// Closer over them, reporting orders/s. It returns the bundle and the
// invariants' baseline taken before the run, for the caller's check.
func benchClose(b *testing.B, opts ...paytest.Option) (*paytest.Bundle, *ordertest.Baseline) {
	pb := paytest.Setup(b, opts...)
	_, err := orderdemo.Generate(pb.Ctx, pb.DB.DB, orderdemo.Spec{Orders: b.N, DueFraction: 1, CouponFraction: 0.3})
	require.NoError(b, err)
	base := pb.Snapshot(b)

	b.ResetTimer()
	st, err := pb.Closer.Run(pb.Ctx, orders.RunOptions{})
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, st.Closed)
	b.ReportMetric(float64(st.Closed)/st.Elapsed.Seconds(), "orders/s")
	return pb, base
}
