package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// What piles up shows: the outbox backlog and its age, failed and
// delivered deliveries, refunds owed (payment conflicts), read from a real
// database through the parts the executor wires.
func TestBacklogGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	_, err := db.ExecContext(ctx, `INSERT INTO order_outbox (event_type, order_no, payload, trace_id, next_attempt_at, created_at) VALUES
		('stock.release', 'B-1', '{}', 't1', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) - INTERVAL 300 SECOND),
		('stock.release', 'B-2', '{}', 't2', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) - INTERVAL 10 SECOND)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, created_at) VALUES
		('wx-1', 'C-1', 9.90, NOW(3), NOW(3) - INTERVAL 2 HOUR), ('wx-2', 'C-2', 5, NOW(3), NOW(3)), ('ali-3', 'C-2', 1, NOW(3), NOW(3))`)
	require.NoError(t, err)

	var up atomic.Bool
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			http.Error(w, "inventory service down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	relay, err := outbox.NewRelay(db.DB, outbox.RelayConfig{
		Endpoints:   map[string]string{outbox.EventStockRelease: recv.URL, outbox.EventCouponRestore: recv.URL},
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
	})
	require.NoError(t, err)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond})
	m.WatchOrders([]*orders.Closer{closer}, nil)
	m.WatchRelay("default", relay)
	refunds := refunds.New(db.DB)
	m.WatchRefunds("default", refunds)

	s := scrape(t, m)
	require.Equal(t, 2.0, value(t, s, metrics.OutboxPending))
	age := value(t, s, metrics.OutboxOldestPendingAge)
	require.GreaterOrEqual(t, age, 300.0)
	require.Less(t, age, 400.0)
	require.Equal(t, 3.0, value(t, s, metrics.OrdersPaymentConflicts))
	require.Equal(t, 3.0, value(t, s, metrics.OrdersRefundsOwed))
	require.InDelta(t, 15.90, value(t, s, metrics.OrdersRefundsOwedAmount), 1e-9)
	require.InDelta(t, 7200, value(t, s, metrics.OrdersRefundsOwedOldestAge), 60)
	_, err = refunds.MarkRefunded(ctx, "wx-1", "refund 5001", "test")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return value(t, scrape(t, m), metrics.OrdersRefundsOwed) == 2 }, 5*time.Second, 10*time.Millisecond)
	s = scrape(t, m)
	require.Equal(t, 3.0, value(t, s, metrics.OrdersPaymentConflicts), "refunded or not")
	require.InDelta(t, 6.0, value(t, s, metrics.OrdersRefundsOwedAmount), 1e-9)
	require.Less(t, value(t, s, metrics.OrdersRefundsOwedOldestAge), 600.0)
	require.Zero(t, value(t, s, metrics.OutboxDeliveriesTotal, "result", "failed"))

	_, err = relay.RunOnce(ctx) // the receiver refuses both
	require.NoError(t, err)
	s = scrape(t, m)
	require.Equal(t, 2.0, value(t, s, metrics.OutboxDeliveriesTotal, "result", "failed"))
	require.Equal(t, 2.0, value(t, s, metrics.OutboxPending))

	up.Store(true)
	require.Eventually(t, func() bool {
		_, err := relay.RunOnce(ctx)
		require.NoError(t, err)
		return value(t, scrape(t, m), metrics.OutboxPending) == 0
	}, 10*time.Second, 5*time.Millisecond)
	s = scrape(t, m)
	require.Equal(t, 2.0, value(t, s, metrics.OutboxDeliveriesTotal, "result", "delivered"))
	require.Zero(t, value(t, s, metrics.OutboxOldestPendingAge))
	require.Zero(t, value(t, s, metrics.OutboxClaimsLostTotal), "one relay on one server loses no claim")
}

// The lifecycle jobs count runs and the orders they complete or flag; the
// payment-side step counts the orders its failures left open.
func TestLifecycleAndTradeErrors(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	ob := m.Lifecycle()
	ctx := context.Background()
	ob.LifecycleUnit("db1", "t_order_3")
	ob.LifecycleRun(ctx, lifecycle.JobFulfillmentTimeout, "default", "order_info", lifecycle.Stats{Scanned: 5, Changed: 4, Skipped: 1}, nil)
	ob.LifecycleRun(ctx, lifecycle.JobFulfillmentTimeout, "default", "order_info", lifecycle.Stats{Scanned: 9, Changed: 9, DryRun: true}, nil)
	ob.LifecycleRun(ctx, lifecycle.JobAutoConfirm, "default", "order_info", lifecycle.Stats{Changed: 2}, context.DeadlineExceeded)
	ob.LifecycleRun(ctx, lifecycle.JobAutoConfirm, "db1", "t_order_3", lifecycle.Stats{Changed: 3}, nil)
	m.Orders().ClosePage(ctx, orders.PageReport{ShardTotal: 1, Scanned: 10, Closed: 7, SkippedLocked: 3, TradeErrors: 2})

	s := scrape(t, m)
	require.Equal(t, 4.0, value(t, s, metrics.LifecycleOrdersTotal, "job", "fulfillment_timeout", "source", "default", "result", "flagged"), "dry runs are not counted")
	require.Equal(t, 1.0, value(t, s, metrics.LifecycleOrdersTotal, "job", "fulfillment_timeout", "source", "default", "result", "skipped"))
	require.Equal(t, 2.0, value(t, s, metrics.LifecycleRunsTotal, "job", "fulfillment_timeout", "source", "default", "result", "ok"))
	require.Equal(t, 1.0, value(t, s, metrics.LifecycleRunsTotal, "job", "auto_confirm", "source", "default", "result", "error"))
	require.Equal(t, 2.0, value(t, s, metrics.LifecycleOrdersTotal, "job", "auto_confirm", "source", "default", "table", "order_info", "result", "completed"))
	require.Equal(t, 3.0, value(t, s, metrics.LifecycleOrdersTotal, "job", "auto_confirm", "source", "db1", "table", "t_order_3", "result", "completed"))
	require.Equal(t, 0.0, value(t, s, metrics.LifecycleOrdersTotal, "job", "fulfillment_timeout", "source", "db1", "table", "t_order_3", "result", "flagged"),
		"a unit's series exist before its first run")
	require.Equal(t, 2.0, value(t, s, metrics.OrdersTradeErrorsTotal, "handler", "other", "shard", "0"))
}
