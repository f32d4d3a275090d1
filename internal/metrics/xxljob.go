package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/xxljob"
)

// Metric names of the XXL-JOB side.
const (
	XXLRunsTotal               = "xxljob_runs_total"
	XXLRunsInProgress          = "xxljob_runs_in_progress"
	XXLRunDurationSeconds      = "xxljob_run_duration_seconds"
	XXLCallbackBatchesTotal    = "xxljob_callback_batches_total"
	XXLCallbackResultsTotal    = "xxljob_callback_results_total"
	XXLCallbackQueueLength     = "xxljob_callback_queue_length"
	XXLCallbackSpoolFiles      = "xxljob_callback_spool_files"
	XXLRegistryHeartbeatsTotal = "xxljob_registry_heartbeats_total"
	XXLRegistryLastSuccess     = "xxljob_registry_last_success_timestamp_seconds"
)

type xxlMetrics struct {
	runs        *prometheus.CounterVec
	inProgress  *prometheus.GaugeVec
	duration    *prometheus.HistogramVec
	cbBatches   *prometheus.CounterVec
	cbResults   *prometheus.CounterVec
	spool       prometheus.Gauge
	heartbeats  *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

func newXXLMetrics(m *Metrics) xxlMetrics {
	x := xxlMetrics{
		runs: m.counterVec(XXLRunsTotal,
			"Runs of XXL-JOB triggers finished, by handler and result (success, fail, timeout).", "handler", "result"),
		inProgress: m.gaugeVec(XXLRunsInProgress, "Runs started and not finished, by handler.", "handler"),
		duration: m.histogramVec(XXLRunDurationSeconds, "Duration of runs from dequeue to result, by handler.",
			[]float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}, "handler"),
		cbBatches: m.counterVec(XXLCallbackBatchesTotal,
			"Attempts to deliver a batch of run results to the admin, by result (ok, error); each error is retried from the spool.", "result"),
		cbResults: m.counterVec(XXLCallbackResultsTotal,
			"Run results in delivery attempts, by result (ok, error).", "result"),
		spool: m.gauge(XXLCallbackSpoolFiles, "Batches of run results spooled to disk because no admin accepted them."),
		heartbeats: m.counterVec(XXLRegistryHeartbeatsTotal,
			"Registry heartbeats sent to the admin, by result (ok, error).", "result"),
		// Registered by WatchExecutor: a process whose XXL-JOB side is off
		// exports no registration time, rather than a 0 alerts would read
		// as "never registered".
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: XXLRegistryLastSuccess,
			Help: "Unix time of the last registry heartbeat an admin accepted (0: none yet)."}),
	}
	m.define(XXLRegistryLastSuccess, kindGauge)
	m.define(XXLCallbackQueueLength, kindGauge) // a GaugeFunc, registered by WatchExecutor
	for _, r := range []string{"ok", "error"} {
		x.cbBatches.WithLabelValues(r)
		x.cbResults.WithLabelValues(r)
		x.heartbeats.WithLabelValues(r)
	}
	return x
}

// XXLJob returns the observer for xxljob.Config.Observer.
func (m *Metrics) XXLJob() xxljob.Observer { return xxlObserver{&m.xxl} }

// WatchExecutor exports the executor's in-memory callback queue length and
// the time of its last accepted registration.
func (m *Metrics) WatchExecutor(e *xxljob.Executor) {
	m.reg.MustRegister(m.xxl.lastSuccess, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: XXLCallbackQueueLength,
		Help: "Run results waiting in memory to be sent to the admin.",
	}, func() float64 { return float64(e.CallbackQueueLen()) }))
}

type xxlObserver struct{ x *xxlMetrics }

func (o xxlObserver) RunStarted(handler string, _ int, _ int64) {
	o.x.inProgress.WithLabelValues(handler).Inc()
}

func (o xxlObserver) RunFinished(handler string, _ int, _ int64, code int, d time.Duration) {
	o.x.inProgress.WithLabelValues(handler).Dec()
	o.x.runs.WithLabelValues(handler, runResult(code)).Inc()
	o.x.duration.WithLabelValues(handler).Observe(d.Seconds())
}

func (o xxlObserver) CallbackSent(items int, err error) {
	r := result(err)
	o.x.cbBatches.WithLabelValues(r).Inc()
	o.x.cbResults.WithLabelValues(r).Add(float64(items))
}

func (o xxlObserver) CallbackSpool(files int) { o.x.spool.Set(float64(files)) }

func (o xxlObserver) Registered(err error) {
	o.x.heartbeats.WithLabelValues(result(err)).Inc()
	if err == nil {
		o.x.lastSuccess.SetToCurrentTime()
	}
}

// runResult names a handleCode.
func runResult(code int) string {
	switch code {
	case xxljob.CodeSuccess:
		return "success"
	case xxljob.CodeFail:
		return "fail"
	case xxljob.CodeTimeout:
		return "timeout"
	}
	return "code_" + strconv.Itoa(code)
}
