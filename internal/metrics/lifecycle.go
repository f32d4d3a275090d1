package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/orders/lifecycle"
)

// Metric names of the lifecycle jobs after payment.
const (
	LifecycleRunsTotal   = "orders_lifecycle_runs_total"
	LifecycleOrdersTotal = "orders_lifecycle_orders_total"
)

type lifecycleMetrics struct {
	runs, orders *prometheus.CounterVec
}

func newLifecycleMetrics(m *Metrics) lifecycleMetrics {
	l := lifecycleMetrics{
		runs: m.counterVec(LifecycleRunsTotal,
			"Runs of the lifecycle jobs, by job (auto_confirm, fulfillment_timeout), order source and table, and result (ok, error): a run over several units counts one per unit.",
			"job", "source", "table", "result"),
		orders: m.counterVec(LifecycleOrdersTotal,
			"Orders the lifecycle jobs changed, by job, order source and table, and result: completed (auto_confirm), flagged (fulfillment_timeout: paid, not shipped in time), skipped (changed by someone else meanwhile). Dry runs are not counted.",
			"job", "source", "table", "result"),
	}
	return l
}

// jobVerbs are the lifecycle jobs and what each does to an order.
var jobVerbs = map[string]string{lifecycle.JobAutoConfirm: "completed", lifecycle.JobFulfillmentTimeout: "flagged"}

// Lifecycle returns the observer for lifecycle.Config.Observer.
func (m *Metrics) Lifecycle() lifecycle.Observer { return lifecycleObserver{&m.lifecycle} }

type lifecycleObserver struct{ l *lifecycleMetrics }

// LifecycleUnit makes the unit's series, at zero, so that an alert on
// their increase sees the first run's.
func (o lifecycleObserver) LifecycleUnit(source, table string) {
	for job, verb := range jobVerbs {
		o.l.runs.WithLabelValues(job, source, table, "ok")
		o.l.runs.WithLabelValues(job, source, table, "error")
		o.l.orders.WithLabelValues(job, source, table, verb)
		o.l.orders.WithLabelValues(job, source, table, "skipped")
	}
}

func (o lifecycleObserver) LifecycleRun(_ context.Context, job, source, table string, st lifecycle.Stats, err error) {
	o.l.runs.WithLabelValues(job, source, table, result(err)).Inc()
	if st.DryRun {
		return
	}
	o.l.orders.WithLabelValues(job, source, table, jobVerbs[job]).Add(float64(st.Changed))
	o.l.orders.WithLabelValues(job, source, table, "skipped").Add(float64(st.Skipped))
}
