// Package xxljobprom records an xxljob.Executor's events as Prometheus
// metrics. It is the only package of this module that imports the
// Prometheus client; package xxljob stays standard library only and reaches
// it through the xxljob.Observer interface.
//
//	obs := xxljobprom.New(xxljobprom.Options{})
//	prometheus.MustRegister(obs)
//	exec, err := xxljob.New(xxljob.Config{..., Observer: obs})
//	obs.Watch(exec) // the in-memory callback queue's length
//
// Metrics (the prefix is Options.Namespace, default "xxljob"):
//
//	xxljob_runs_total{handler,result}          runs finished: success, fail, timeout (or code_N)
//	xxljob_runs_in_progress{handler}           runs started and not finished
//	xxljob_run_duration_seconds{handler}       histogram, dequeue to result
//	xxljob_callback_batches_total{result}      delivery attempts of result batches: ok, error
//	xxljob_callback_results_total{result}      results in those attempts: ok, error
//	xxljob_callback_queue_length               results waiting in memory for delivery
//	xxljob_callback_spool_results              results waiting on disk (no admin accepted them yet)
//	xxljob_registry_heartbeats_total{result}   registry rounds: ok, error
//	xxljob_registry_last_success_timestamp_seconds   Unix time of the last accepted heartbeat (0: none)
//
// The last two come with Watch: a process that never runs its executor
// (its XXL-JOB side switched off) exports no queue and no registration time,
// rather than a 0 that an alert would read as "never registered".
package xxljobprom

import (
	"cmp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/xxljob"
)

// Options configures the metrics.
type Options struct {
	// Namespace prefixes every metric name. Default "xxljob".
	Namespace string
	// ConstLabels are added to every metric (e.g. the executor's appname
	// when one process runs several executors).
	ConstLabels prometheus.Labels
	// DurationBuckets are the run duration histogram's buckets, in seconds.
	// Default: 10 ms to 1 h.
	DurationBuckets []float64
}

// Observer implements xxljob.Observer and prometheus.Collector.
type Observer struct {
	runs        *prometheus.CounterVec
	inProgress  *prometheus.GaugeVec
	duration    *prometheus.HistogramVec
	cbBatches   *prometheus.CounterVec
	cbResults   *prometheus.CounterVec
	spool       prometheus.Gauge
	heartbeats  *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	queueDesc   *prometheus.Desc
	queue       atomic.Pointer[xxljob.Executor]
}

var _ xxljob.Observer = (*Observer)(nil)

// Metric names without the namespace, for tools that list what a scrape
// can carry (alerting rule checks, dashboards).
var Names = []string{
	"runs_total", "runs_in_progress", "run_duration_seconds", "callback_batches_total", "callback_results_total",
	"callback_queue_length", "callback_spool_results", "registry_heartbeats_total", "registry_last_success_timestamp_seconds",
}

// New builds the metrics; register the Observer with a registry.
func New(opts Options) *Observer {
	ns := cmp.Or(opts.Namespace, "xxljob")
	buckets := opts.DurationBuckets
	if buckets == nil {
		buckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	}
	cl := opts.ConstLabels
	o := &Observer{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runs_total", ConstLabels: cl,
			Help: "Runs of XXL-JOB triggers finished, by handler and result (success, fail, timeout)."}, []string{"handler", "result"}),
		inProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "runs_in_progress", ConstLabels: cl,
			Help: "Runs started and not finished, by handler."}, []string{"handler"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "run_duration_seconds", ConstLabels: cl,
			Help: "Duration of runs from dequeue to result, by handler.", Buckets: buckets}, []string{"handler"}),
		cbBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "callback_batches_total", ConstLabels: cl,
			Help: "Attempts to deliver a batch of run results to the admin, by result (ok, error); each error is retried from the spool."}, []string{"result"}),
		cbResults: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "callback_results_total", ConstLabels: cl,
			Help: "Run results in delivery attempts, by result (ok, error)."}, []string{"result"}),
		spool: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "callback_spool_results", ConstLabels: cl,
			Help: "Run results waiting in the disk spool because no admin accepted them yet."}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "registry_heartbeats_total", ConstLabels: cl,
			Help: "Registry heartbeats sent to the admin, by result (ok, error)."}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "registry_last_success_timestamp_seconds", ConstLabels: cl,
			Help: "Unix time of the last registry heartbeat an admin accepted (0: none yet)."}),
		queueDesc: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "callback_queue_length"),
			"Run results waiting in memory to be sent to the admin.", nil, cl),
	}
	for _, r := range []string{"ok", "error"} {
		o.cbBatches.WithLabelValues(r)
		o.cbResults.WithLabelValues(r)
		o.heartbeats.WithLabelValues(r)
	}
	return o
}

// Watch attaches the executor: from now on its in-memory callback queue
// length and the registration time are exported too.
func (o *Observer) Watch(e *xxljob.Executor) { o.queue.Store(e) }

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.runs, o.inProgress, o.duration, o.cbBatches, o.cbResults, o.spool, o.heartbeats}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
	o.lastSuccess.Describe(ch)
	ch <- o.queueDesc
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
	if e := o.queue.Load(); e != nil {
		o.lastSuccess.Collect(ch)
		ch <- prometheus.MustNewConstMetric(o.queueDesc, prometheus.GaugeValue, float64(e.CallbackQueueLen()))
	}
}

// RunStarted implements xxljob.Observer.
func (o *Observer) RunStarted(handler string, _ int, _ int64) {
	o.inProgress.WithLabelValues(handler).Inc()
}

// RunFinished implements xxljob.Observer.
func (o *Observer) RunFinished(handler string, _ int, _ int64, code int, d time.Duration) {
	o.inProgress.WithLabelValues(handler).Dec()
	o.runs.WithLabelValues(handler, runResult(code)).Inc()
	o.duration.WithLabelValues(handler).Observe(d.Seconds())
}

// CallbackSent implements xxljob.Observer.
func (o *Observer) CallbackSent(items int, err error) {
	r := result(err)
	o.cbBatches.WithLabelValues(r).Inc()
	o.cbResults.WithLabelValues(r).Add(float64(items))
}

// CallbackSpool implements xxljob.Observer.
func (o *Observer) CallbackSpool(results int) { o.spool.Set(float64(results)) }

// Registered implements xxljob.Observer.
func (o *Observer) Registered(err error) {
	o.heartbeats.WithLabelValues(result(err)).Inc()
	if err == nil {
		o.lastSuccess.SetToCurrentTime()
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
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
