// Package metrics is the Prometheus adapter of the executor: it implements
// the observer interfaces of xxljob, orders and delay (which know nothing of
// Prometheus), samples the database-backed gauges (overdue orders, dead
// letters, delayed-task backlog) at most every few seconds, and serves
// everything in the Prometheus text format through the official client
// library.
//
// The metric names, with their units, are listed in docs/monitoring.md and
// checked against deploy/prometheus/alerts.yml and the Grafana dashboard by
// this package's tests.
package metrics

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures Metrics. Zero values take the defaults given.
type Config struct {
	// SampleInterval: the order gauges read from the database (overdue
	// orders, dead letters) are refreshed at most this often, when scraped.
	// Default 10s.
	SampleInterval time.Duration
	// DelaySampleInterval: the same for the delayed-task gauges, whose
	// status counts scan job_delay_task's status index. Default 30s.
	DelaySampleInterval time.Duration
	// SampleTimeout bounds each sampling query. Default 3s.
	SampleTimeout time.Duration
	// Logger receives sampling failures. Default: discard.
	Logger *slog.Logger
	// Version and Commit of the binary, exported with the Go version as
	// executor_build_info. Default "unknown".
	Version, Commit string
}

// BuildInfo is the metric naming the binary: always 1, with labels
// version, commit and goversion.
const BuildInfo = "executor_build_info"

// Metrics owns a Prometheus registry with the executor's metrics. Build it
// with New, hand its observers to the parts (XXLJob, Orders, Delay), attach
// the sampled sources (WatchExecutor, WatchOrders, WatchDispatcher, WatchDB)
// and serve Handler on the API port's /metrics.
type Metrics struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	mu   sync.Mutex
	defs map[string]kind // every family name this package defines

	xxl       xxlMetrics
	orders    orderMetrics
	lifecycle lifecycleMetrics
	delay     delayMetrics
	smp       samplerMetrics

	authFailures *prometheus.CounterVec
}

// kind is a metric family's type, for Names.
type kind int

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
)

// New builds the registry with the Go runtime, process and build-info
// collectors and every metric of this package.
func New(cfg Config) *Metrics {
	cfg.SampleInterval = cmp.Or(cfg.SampleInterval, 10*time.Second)
	cfg.DelaySampleInterval = cmp.Or(cfg.DelaySampleInterval, 30*time.Second)
	cfg.SampleTimeout = cmp.Or(cfg.SampleTimeout, 3*time.Second)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{cfg: cfg, log: log.With("component", "metrics"), reg: prometheus.NewRegistry(), defs: map[string]kind{}}
	m.reg.MustRegister(runtimeCollectors()...)
	m.smp = newSamplerMetrics(m)
	m.xxl = newXXLMetrics(m)
	m.orders = newOrderMetrics(m)
	m.lifecycle = newLifecycleMetrics(m)
	m.define(OutboxPending, kindGauge) // registered by WatchRelay
	m.define(OutboxOldestPendingAge, kindGauge)
	m.define(OutboxDeliveriesTotal, kindCounter)
	m.define(OutboxParked, kindGauge)
	m.define(OutboxPassErrorsTotal, kindCounter)
	for _, n := range []string{OrdersPaymentConflicts, OrdersRefundsOwed, OrdersRefundsOwedAmount, OrdersRefundsOwedOldestAge} {
		m.define(n, kindGauge) // registered by WatchRefunds
	}
	m.delay = newDelayMetrics(m)
	m.authFailures = m.counterVec(AuthFailuresTotal, "Refused authentications (wrong or missing token), by surface: executor, api, console.", "surface")
	for _, s := range []string{SurfaceExecutor, SurfaceAPI, SurfaceConsole} {
		m.authFailures.WithLabelValues(s) // exported at 0, so rate() sees the first failure
	}
	m.gaugeVec(BuildInfo, "The executor binary: always 1, labelled with its version, commit and Go version.",
		"version", "commit", "goversion").
		WithLabelValues(cmp.Or(cfg.Version, "unknown"), cmp.Or(cfg.Commit, "unknown"), runtime.Version()).Set(1)
	return m
}

func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	}
}

// Handler serves the registry in the Prometheus exposition formats, with the
// handler's own request counters.
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	}))
}

// Registry returns the registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Names returns every series name /metrics can carry: this package's
// families (histograms with their _bucket, _sum and _count series) and those
// of the runtime collectors and the handler, sorted. Alerting rules and
// dashboards may query only these.
func (m *Metrics) Names() []string {
	set := map[string]bool{}
	add := func(name string, k kind) {
		switch k {
		case kindHistogram:
			set[name+"_bucket"], set[name+"_sum"], set[name+"_count"] = true, true, true
		default:
			set[name] = true
		}
	}
	m.mu.Lock()
	for n, k := range m.defs {
		add(n, k)
	}
	m.mu.Unlock()
	// The families of the runtime collectors (go_*, process_*), of the
	// database pool's (go_sql_*) and of the handler's own (promhttp_*):
	// gathered from fresh instances over a pool that never connects
	// (gathering m.reg would run the samplers' queries).
	rt := prometheus.NewRegistry()
	rt.MustRegister(runtimeCollectors()...)
	db := sql.OpenDB(noConnector{})
	defer db.Close()
	rt.MustRegister(collectors.NewDBStatsCollector(db, "x"))
	promhttp.InstrumentMetricHandler(rt, promhttp.HandlerFor(rt, promhttp.HandlerOpts{Registry: rt}))
	if mfs, err := rt.Gather(); err == nil {
		for _, mf := range mfs {
			switch mf.GetType().String() {
			case "HISTOGRAM":
				add(mf.GetName(), kindHistogram)
			case "SUMMARY":
				set[mf.GetName()], set[mf.GetName()+"_sum"], set[mf.GetName()+"_count"] = true, true, true
			default:
				set[mf.GetName()] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// define records a family name this package exports.
func (m *Metrics) define(name string, k kind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.defs[name] = k
}

func (m *Metrics) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	m.reg.MustRegister(v)
	m.define(name, kindCounter)
	return v
}

func (m *Metrics) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	m.reg.MustRegister(v)
	m.define(name, kindGauge)
	return v
}

func (m *Metrics) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	m.reg.MustRegister(v)
	m.define(name, kindHistogram)
	return v
}

// result labels an outcome that either worked or failed.
func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// WatchDB exports the statistics (go_sql_*, db_name "orders") of db, the
// MySQL connection pool of the order source named source ("default":
// mysql.dsn's own), labelled with it. Call it once per pool.
func (m *Metrics) WatchDB(source string, db *sql.DB) {
	src := prometheus.WrapRegistererWith(prometheus.Labels{"source": source}, m.reg)
	src.MustRegister(collectors.NewDBStatsCollector(db, "orders"))
}

// noConnector is a driver.Connector that never connects: Names builds a
// DBStatsCollector over it to learn the family names.
type noConnector struct{}

func (noConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("metrics: no database")
}
func (noConnector) Driver() driver.Driver { return nil }
