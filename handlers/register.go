package handlers

import (
	"context"
	"maps"
	"slices"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/sql/migrations"
	"github.com/orderjob/executor/xxljob"
)

// Deps are the domain objects the order handlers call. A nil *Deps registers
// only the handlers that need nothing (demoJob), for `executor run demoJob`
// on a machine without MySQL or Redis.
type Deps struct {
	Closer *orders.Closer
	// Units are orderTimeoutCloseJob's: an order table of an order
	// database each (order.sources). Empty: Closer alone.
	Units []*orders.Closer
	// RetryUnits are deadLetterRetryJob's: the units, and Closer when
	// mysql.dsn is no unit's database. Empty: Closer alone.
	RetryUnits []*orders.Closer
	Dispatcher *delay.Dispatcher
	// DelaySources are the dispatchers of the order databases other than
	// the home database (order.sources), swept with it.
	DelaySources []SourceDispatcher
	Lifecycle    *lifecycle.Jobs // orderAutoConfirmJob, orderFulfillmentTimeoutJob
	// LifecycleUnits are the lifecycle jobs' units with order.sources, as
	// Units are the close's. Empty: Lifecycle alone.
	LifecycleUnits []*lifecycle.Jobs
	// NoLifecycle, when Lifecycle is nil on purpose, is why: the lifecycle
	// handlers fail every run with it.
	NoLifecycle error
}

// Register adds every handler to the executor under its console name.
func Register(e *xxljob.Executor, d *Deps) error {
	for name, h := range table(d) {
		if err := e.Register(name, explained(h)); err != nil {
			return err
		}
	}
	return nil
}

// Names lists every handler Register adds with Deps, sorted: the JobHandler
// names the console may use.
func Names() []string {
	names := slices.Collect(maps.Keys(table(&Deps{})))
	slices.Sort(names)
	return names
}

// table maps each console name to its handler; without Deps only demoJob.
func table(d *Deps) map[string]xxljob.Handler {
	t := map[string]xxljob.Handler{DemoJob: Demo()}
	if d == nil {
		return t
	}
	t[OrderTimeoutCloseJob] = OrderTimeoutClose(d.Closer)
	if len(d.Units) > 0 {
		t[OrderTimeoutCloseJob] = OrderTimeoutCloseUnits(d.Units...)
	}
	t[DelayTaskSweepJob] = DelayTaskSweep(d.Dispatcher, d.DelaySources...)
	t[DeadLetterRetryJob] = DeadLetterRetry(d.Closer)
	if len(d.RetryUnits) > 0 {
		t[DeadLetterRetryJob] = DeadLetterRetryUnits(d.RetryUnits...)
	}
	life := []*lifecycle.Jobs{d.Lifecycle}
	if len(d.LifecycleUnits) > 0 {
		life = d.LifecycleUnits
	}
	t[OrderAutoConfirmJob] = withoutLifecycle(OrderAutoConfirmUnits(life...), OrderAutoConfirmJob, d.NoLifecycle)
	t[OrderFulfillmentTimeoutJob] = withoutLifecycle(OrderFulfillmentTimeoutUnits(life...), OrderFulfillmentTimeoutJob, d.NoLifecycle)
	return t
}

// explained adds "run `executor migrate`" to a run's error when a table or
// column is missing, so the admin's run log says what to do.
func explained(h xxljob.Handler) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		return migrations.Explain(h.Handle(ctx, req))
	})
}
