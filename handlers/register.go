package handlers

import (
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// Deps are the domain objects the order handlers call. A nil *Deps registers
// only the handlers that need nothing (demoJob), for `executor run demoJob`
// on a machine without MySQL or Redis.
type Deps struct {
	Closer     *orders.Closer
	Dispatcher *delay.Dispatcher
	Lifecycle  *orders.Lifecycle // orderAutoConfirmJob, orderFulfillmentTimeoutJob
}

// Register adds every handler to the executor under its console name.
func Register(e *xxljob.Executor, d *Deps) error {
	if err := e.Register(DemoJob, Demo()); err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	for name, h := range map[string]xxljob.Handler{
		OrderTimeoutCloseJob: OrderTimeoutClose(d.Closer),
		DelayTaskSweepJob:    DelayTaskSweep(d.Dispatcher),
		// Dead letters and the lifecycle after payment (issue 7).
		DeadLetterRetryJob:         DeadLetterRetry(d.Closer),
		OrderAutoConfirmJob:        OrderAutoConfirm(d.Lifecycle),
		OrderFulfillmentTimeoutJob: OrderFulfillmentTimeout(d.Lifecycle),
	} {
		if err := e.Register(name, h); err != nil {
			return err
		}
	}
	return nil
}
