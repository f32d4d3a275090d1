package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// BenchmarkClosePageHooks is what the close path pays the Prometheus
// observer per page of 500 orders: the page counters, 500 lateness
// observations and the lock report. The page itself costs tens of ms.
func BenchmarkClosePageHooks(b *testing.B) {
	ob := metrics.New(metrics.Config{}).Orders()
	ctx := context.Background()
	late := make([]time.Duration, 500)
	for i := range late {
		late[i] = time.Duration(i) * time.Second
	}
	b.ReportAllocs()
	for b.Loop() {
		ob.LocksAcquired(ctx, orderlock.Report{Keys: 500, Held: 499, Taken: 1, Duration: time.Millisecond})
		ob.ClosePage(ctx, orders.PageReport{ShardIndex: 3, ShardTotal: 8, Scanned: 500, Closed: 498, SkippedPaid: 1, SkippedLocked: 1})
		ob.OrdersClosed(ctx, late)
	}
}
