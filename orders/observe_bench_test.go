package orders_test

import (
	"testing"

	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// BenchmarkCloseRunObserved is BenchmarkCloseRun with the Prometheus
// observer on the closer and the locker, as serve runs it: compare the two
// for the hooks' cost (per page, plus one histogram observation per order).
func BenchmarkCloseRunObserved(b *testing.B) {
	obs := metrics.New(metrics.Config{}).Orders()
	benchClose(b, paytest.WithLocker(orderlock.Config{Observer: obs}), paytest.WithCloser(orders.CloserConfig{Observer: obs}))
}
