package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/orders"
)

// Metric names of the samplers themselves.
const (
	SamplerErrorsTotal = "executor_sampler_errors_total"
	SamplerLastSuccess = "executor_sampler_last_success_timestamp_seconds"
)

type samplerMetrics struct {
	errors      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

func newSamplerMetrics(m *Metrics) samplerMetrics {
	return samplerMetrics{
		errors: m.counterVec(SamplerErrorsTotal,
			"Failed reads of a sampled source (orders, delay); its gauges keep their last values.", "sampler"),
		lastSuccess: m.gaugeVec(SamplerLastSuccess,
			"Unix time of the last successful read of a sampled source.", "sampler"),
	}
}

// sampler is a collector whose metrics come from a query that is run when
// scraped, at most once per interval: scrapes in between (several
// Prometheus servers, a dashboard refresh) get the cached values, so the
// database sees one query per interval however often /metrics is read. A
// failed read keeps the last values (an alert that fires keeps firing while
// the database is away) and counts in executor_sampler_errors_total.
type sampler struct {
	name     string
	interval time.Duration
	timeout  time.Duration
	descs    []*prometheus.Desc
	read     func(ctx context.Context) ([]prometheus.Metric, error)
	m        *Metrics

	mu   sync.Mutex // held during a read: concurrent scrapes wait for it
	at   time.Time  // last read attempt
	last []prometheus.Metric
}

func (m *Metrics) newSampler(name string, interval time.Duration, descs []*prometheus.Desc, read func(ctx context.Context) ([]prometheus.Metric, error)) *sampler {
	m.smp.errors.WithLabelValues(name)
	return &sampler{name: name, interval: interval, timeout: m.cfg.SampleTimeout, descs: descs, read: read, m: m}
}

// Describe implements prometheus.Collector.
func (s *sampler) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *sampler) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || time.Since(s.at) >= s.interval {
		s.at = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		ms, err := s.read(ctx)
		cancel()
		if err != nil {
			s.m.smp.errors.WithLabelValues(s.name).Inc()
			s.m.log.Warn("metrics sample failed; gauges keep their last values", "sampler", s.name, "error", err.Error())
		} else {
			s.last = ms
			s.m.smp.lastSuccess.WithLabelValues(s.name).SetToCurrentTime()
		}
	}
	for _, m := range s.last {
		ch <- m
	}
}

// samplerName names, in executor_sampler_errors_total, the sampler of kind
// ("orders", "delay", "outbox", "refunds") reading the database of the
// order source named source: kind alone, as before order.sources, for
// the default one (mysql.dsn's when no source is on it), "kind:SOURCE"
// for another.
func samplerName(kind, source string) string {
	if source == orders.DefaultSourceName {
		return kind
	}
	return kind + ":" + source
}

// gaugeDef names and explains one sampled series.
type gaugeDef struct{ name, help string }

// descs makes the descriptions of defs, unlabelled but for labels.
func descs(labels prometheus.Labels, defs []gaugeDef) []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(defs))
	for i, d := range defs {
		out[i] = prometheus.NewDesc(d.name, d.help, nil, labels)
	}
	return out
}

// gaugeSampler is a sampler, every SampleInterval, of the unlabelled gauges
// defs (but for labels): read fetches a snapshot S, values gives the
// gauges' values from it in the order of defs.
func gaugeSampler[S any](m *Metrics, name string, labels prometheus.Labels, defs []gaugeDef,
	read func(context.Context) (S, error), values func(S) []float64) *sampler {
	ds := descs(labels, defs)
	return m.newSampler(name, m.cfg.SampleInterval, ds, func(ctx context.Context) ([]prometheus.Metric, error) {
		s, err := read(ctx)
		if err != nil {
			return nil, err
		}
		vs := values(s)
		out := make([]prometheus.Metric, len(ds))
		for i, d := range ds {
			out[i] = prometheus.MustNewConstMetric(d, prometheus.GaugeValue, vs[i])
		}
		return out, nil
	})
}
