package main

import (
	"context"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
)

// closeOrdersForTasks is the closer's batch entry point as the
// orderTimeoutClose batch handler calls it: one CloseOrders per batch of
// due tasks, with the closer's log lines about an order (a dead letter, a
// lease that ran out) tagged with the trace id of that order's task.
// cmd/bench's delay benchmark wires the same.
func closeOrdersForTasks(c *orders.Closer) func(ctx context.Context, orderNos []string) ([]orders.Result, error) {
	return func(ctx context.Context, orderNos []string) ([]orders.Result, error) {
		return c.CloseOrders(orders.WithOrderContexts(ctx, delay.OrderContexts(ctx)), orderNos)
	}
}
