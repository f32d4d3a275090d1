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
			"Runs of the lifecycle jobs, by job (auto_confirm, fulfillment_timeout) and result (ok, error).", "job", "result"),
		orders: m.counterVec(LifecycleOrdersTotal,
			"Orders the lifecycle jobs changed, by job and result: completed (auto_confirm), flagged (fulfillment_timeout: paid, not shipped in time), skipped (changed by someone else meanwhile). Dry runs are not counted.",
			"job", "result"),
	}
	for job, verb := range map[string]string{lifecycle.JobAutoConfirm: "completed", lifecycle.JobFulfillmentTimeout: "flagged"} {
		l.runs.WithLabelValues(job, "ok")
		l.runs.WithLabelValues(job, "error")
		l.orders.WithLabelValues(job, verb)
		l.orders.WithLabelValues(job, "skipped")
	}
	return l
}

// Lifecycle returns the observer for lifecycle.Config.Observer.
func (m *Metrics) Lifecycle() lifecycle.Observer { return lifecycleObserver{&m.lifecycle} }

type lifecycleObserver struct{ l *lifecycleMetrics }

func (o lifecycleObserver) LifecycleRun(_ context.Context, job string, st lifecycle.Stats, err error) {
	o.l.runs.WithLabelValues(job, result(err)).Inc()
	if st.DryRun {
		return
	}
	verb := "completed"
	if job == lifecycle.JobFulfillmentTimeout {
		verb = "flagged"
	}
	o.l.orders.WithLabelValues(job, verb).Add(float64(st.Changed))
	o.l.orders.WithLabelValues(job, "skipped").Add(float64(st.Skipped))
}
