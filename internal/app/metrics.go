package app

import (
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/refunds"
	"github.com/orderjob/executor/xxljob"
)

// Observers are the metrics hooks Open gives the parts it builds. The zero
// value means none.
type Observers struct {
	Orders    orders.Observer
	Lifecycle lifecycle.Observer
	Delay     delay.Observer
}

// MetricsObservers are m's hooks.
func MetricsObservers(m *metrics.Metrics) Observers {
	return Observers{Orders: m.Orders(), Lifecycle: m.Lifecycle(), Delay: m.Delay()}
}

// watchServe attaches the sampled sources of a serving process to m; exec
// is nil when the XXL-JOB side is off.
func watchServe(m *metrics.Metrics, exec *xxljob.Executor, d *Deps) {
	if exec != nil {
		m.WatchExecutor(exec)
	}
	m.WatchOrders(d.units, d.retry)
	home := homeName(d.sources)
	m.WatchRefunds(home, refunds.New(d.db))
	for _, s := range otherDatabases(d.sources) {
		m.WatchRefunds(s.name, refunds.New(s.db))
	}
	for _, r := range d.relays {
		m.WatchRelay(r.Source, r.Relay)
	}
	m.WatchDispatcher(home, d.delay)
	for _, s := range d.delaySources {
		m.WatchDispatcher(s.name, s.delay)
	}
	if d.rabbit != nil {
		m.WatchRabbitMQTimer(d.rabbit)
	}
	m.WatchDB(defaultName(d.sources), d.db.DB)
	for i, db := range d.unitDBs {
		m.WatchDB(d.sources[i].name, db.DB) // OpenUnits' pools, one per source in order
	}
}

// xxlObservers passes each event to every observer in turn (the registry
// watch behind /readyz, and the metrics).
type xxlObservers []xxljob.Observer

// AuthFailed passes a refused request to the observers that want it.
func (o xxlObservers) AuthFailed(remote string) {
	for _, x := range o {
		if a, ok := x.(xxljob.AuthObserver); ok {
			a.AuthFailed(remote)
		}
	}
}

// xxlMetrics is m's XXL-JOB observer that also counts the executor port's
// refused requests.
type xxlMetrics struct {
	xxljob.Observer
	m *metrics.Metrics
}

func newXXLMetrics(m *metrics.Metrics) xxlMetrics { return xxlMetrics{m.XXLJob(), m} }

func (x xxlMetrics) AuthFailed(string) { x.m.AuthFailed(metrics.SurfaceExecutor) }

func (o xxlObservers) RunStarted(handler string, jobID int, logID int64) {
	for _, x := range o {
		x.RunStarted(handler, jobID, logID)
	}
}

func (o xxlObservers) RunFinished(handler string, jobID int, logID int64, code int, d time.Duration) {
	for _, x := range o {
		x.RunFinished(handler, jobID, logID, code, d)
	}
}

func (o xxlObservers) CallbackSent(items int, err error) {
	for _, x := range o {
		x.CallbackSent(items, err)
	}
}

func (o xxlObservers) CallbackSpool(files int) {
	for _, x := range o {
		x.CallbackSpool(files)
	}
}

func (o xxlObservers) Registered(err error) {
	for _, x := range o {
		x.Registered(err)
	}
}
