package main

import (
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// observers are the metrics hooks openDeps gives the parts it builds. The
// zero value (and no value at all) means none.
type observers struct {
	orders    orders.Observer
	lifecycle orders.LifecycleObserver
	delay     delay.Observer
}

func depsObservers(m *metrics.Metrics) observers {
	return observers{orders: m.Orders(), lifecycle: m.Lifecycle(), delay: m.Delay()}
}

// pickObservers returns openDeps' optional argument.
func pickObservers(obs []observers) observers {
	if len(obs) > 0 {
		return obs[0]
	}
	return observers{}
}

// watchServe attaches the sampled sources of a serving process to m; exec
// is nil when the XXL-JOB side is off.
func watchServe(m *metrics.Metrics, exec *xxljob.Executor, svc *services) {
	if exec != nil {
		m.WatchExecutor(exec)
	}
	m.WatchCloser(svc.closer)
	m.WatchRefunds(orders.NewRefunds(svc.db))
	if svc.relay != nil {
		m.WatchRelay(svc.relay)
	}
	m.WatchDispatcher(svc.delay)
	if svc.rabbit != nil {
		m.WatchRabbitMQTimer(svc.rabbit)
	}
	m.WatchDB(svc.db.DB)
}

// xxlObservers passes each event to every observer in turn (the registry
// watch behind /readyz, and the metrics).
type xxlObservers []xxljob.Observer

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
