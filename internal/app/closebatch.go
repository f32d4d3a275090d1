package app

import (
	"context"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/orders"
)

// OrderCloseBatchHandler is the orderTimeoutClose batch handler the
// dispatcher runs (and cmd/bench's delay benchmark measures): one
// CloseOrders per batch of due tasks, with the closer's log lines about an
// order (a dead letter, a lease that ran out) tagged with the trace id of
// that order's task.
func OrderCloseBatchHandler(c *orders.Closer) delay.BatchHandlerFunc {
	return handlers.DelayOrderCloseBatch(func(ctx context.Context, orderNos []string) ([]orders.Result, error) {
		return c.CloseOrders(orders.WithOrderContexts(ctx, handlers.DelayOrderContexts(ctx)), orderNos)
	})
}
