package handlers

import (
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// Deps are the domain objects the order handlers call. A nil *Deps registers
// only the handlers that need nothing (demoJob), for `executor run demoJob`
// on a machine without MySQL or Redis.
type Deps struct {
	Closer *orders.Closer
}

// Register adds every handler to the executor under its console name.
func Register(e *xxljob.Executor, d *Deps) error {
	if err := e.Register(DemoJob, Demo()); err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	return e.Register(OrderTimeoutCloseJob, OrderTimeoutClose(d.Closer))
}
