package orders_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
)

// BenchmarkCloseRunOutbox is BenchmarkCloseRun in outbox mode: one
// multi-row outbox INSERT per page instead of the stock and coupon UPDATEs.
func BenchmarkCloseRunOutbox(b *testing.B) {
	pb, base := benchClose(b, paytest.WithCloser(orders.CloserConfig{Compensation: orders.CompensateOutbox}))
	require.NoError(b, ordertest.CheckOutbox(pb.Ctx, pb.DB, base, ordertest.OutboxOptions{}))
}
