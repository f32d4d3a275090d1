package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/delay"
)

// Metric names of the delayed tasks.
const (
	DelayAttemptsTotal        = "delay_task_attempts_total"
	DelayLatenessSeconds      = "delay_task_dispatch_lateness_seconds"
	DelayTasks                = "delay_tasks"
	DelayTasksDue             = "delay_tasks_due"
	DelayTasksOldestDueAge    = "delay_tasks_oldest_due_age_seconds"
	DelayTasksStuckRunning    = "delay_tasks_stuck_running"
	DelayClaimsTotal          = "delay_task_claims_total"
	DelayRecoveredTotal       = "delay_task_recoveries_total"
	delayHandlerLabelMaxChars = 64
)

type delayMetrics struct {
	attempts *prometheus.CounterVec
	lateness *prometheus.HistogramVec
}

func newDelayMetrics(m *Metrics) delayMetrics {
	d := delayMetrics{
		attempts: m.counterVec(DelayAttemptsTotal,
			"Attempts of delayed tasks, by handler and result (done, retry, failed, released, lost, not_now, not_due).", "handler", "result"),
		lateness: m.histogramVec(DelayLatenessSeconds,
			"Time from a delayed task's due time to the start of its attempt, on the database clock, by handler.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}, "handler"),
	}
	for _, n := range []string{DelayTasks, DelayTasksDue, DelayTasksOldestDueAge, DelayTasksStuckRunning, DelayClaimsTotal, DelayRecoveredTotal} {
		k := kindGauge
		if strings.HasSuffix(n, "_total") {
			k = kindCounter
		}
		m.define(n, k)
	}
	defineRabbitMQ(m)
	return d
}

// Delay returns the observer for delay.Config.Observer.
func (m *Metrics) Delay() delay.Observer { return delayObserver{&m.delay} }

// WatchDispatcher exports the claim and recovery totals of d, the
// dispatcher of the order database named source ("default" for
// mysql.dsn's when no order source is on it), and samples its table
// (counts by status, backlog, stuck claims) at most every
// DelaySampleInterval. Every series carries source; each dispatcher's
// table is read on a sampler of its own ("delay", or "delay:SOURCE"), so
// a database that does not answer leaves the others' gauges fresh. Call
// it once per dispatcher.
func (m *Metrics) WatchDispatcher(source string, d *delay.Dispatcher) {
	src := prometheus.Labels{"source": source}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: DelayClaimsTotal, Help: "Delayed tasks claimed by this dispatcher (timer and sweep), by order database.", ConstLabels: src,
		}, func() float64 { return float64(d.Counters().Claimed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: DelayRecoveredTotal, Help: "Stuck RUNNING tasks this dispatcher recovered (to PENDING or FAILED), by order database.", ConstLabels: src,
		}, func() float64 { return float64(d.Counters().Recovered) }),
	)
	tasks := prometheus.NewDesc(DelayTasks, "Delayed tasks in job_delay_task, by order database and status (sampled).", []string{"status"}, src)
	gauges := descs(src, []gaugeDef{
		{DelayTasksDue, "PENDING delayed tasks already due: the backlog, by order database (sampled)."},
		{DelayTasksOldestDueAge, "How long the oldest due PENDING task has been due, by order database (0: none; sampled)."},
		{DelayTasksStuckRunning, "Tasks RUNNING longer than the running timeout, waiting to be recovered, by order database (sampled)."},
	})
	c := d.Client()
	m.reg.MustRegister(m.newSampler(samplerName("delay", source), m.cfg.DelaySampleInterval, append(gauges, tasks),
		func(ctx context.Context) ([]prometheus.Metric, error) {
			s, err := c.Stats(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]prometheus.Metric, 0, len(delay.Statuses)+len(gauges))
			for _, st := range delay.Statuses {
				out = append(out, prometheus.MustNewConstMetric(tasks, prometheus.GaugeValue, float64(s.Counts[st]), string(st)))
			}
			values := [...]float64{float64(s.DueNow), max(time.Duration(s.OldestDueAge), 0).Seconds(), float64(s.StuckRunning)}
			for i, g := range gauges {
				out = append(out, prometheus.MustNewConstMetric(g, prometheus.GaugeValue, values[i]))
			}
			return out, nil
		}))
}

type delayObserver struct{ d *delayMetrics }

func (o delayObserver) TaskAttempted(handler, result string, lateness, _ time.Duration) {
	h := delayHandlerLabel(handler)
	o.d.attempts.WithLabelValues(h, result).Inc()
	o.d.lateness.WithLabelValues(h).Observe(max(lateness, 0).Seconds())
}

// delayHandlerLabel keeps the handler label's values few: an HTTP target is
// labelled by its service, not its path (paths may carry ids).
func delayHandlerLabel(handler string) string {
	if svc, _, ok := delay.ParseHTTPHandler(handler); ok {
		return delay.HTTPHandlerPrefix + svc
	}
	if len(handler) > delayHandlerLabelMaxChars {
		return handler[:delayHandlerLabelMaxChars]
	}
	return handler
}

// Metric names of the RabbitMQ timer (delay.timer: rabbitmq).
const (
	DelayRabbitMQConnected       = "delay_rabbitmq_connected"
	DelayRabbitMQHeld            = "delay_rabbitmq_held_messages"
	DelayRabbitMQPublishedTotal  = "delay_rabbitmq_published_total"
	DelayRabbitMQRepublished     = "delay_rabbitmq_republished_total"
	DelayRabbitMQHopsTotal       = "delay_rabbitmq_hops_total"
	DelayRabbitMQDuplicatesTotal = "delay_rabbitmq_duplicates_total"
	DelayRabbitMQFailuresTotal   = "delay_rabbitmq_publish_failures_total"
	DelayRabbitMQReconnectsTotal = "delay_rabbitmq_reconnects_total"
)

func defineRabbitMQ(m *Metrics) {
	for _, n := range []string{DelayRabbitMQConnected, DelayRabbitMQHeld} {
		m.define(n, kindGauge)
	}
	for _, n := range []string{DelayRabbitMQPublishedTotal, DelayRabbitMQRepublished, DelayRabbitMQHopsTotal,
		DelayRabbitMQDuplicatesTotal, DelayRabbitMQFailuresTotal, DelayRabbitMQReconnectsTotal} {
		m.define(n, kindCounter)
	}
}

// WatchRabbitMQTimer exports the RabbitMQ timer's state and totals, read
// at each scrape (no broker round trip), all from one snapshot.
func (m *Metrics) WatchRabbitMQTimer(t *delay.RabbitMQTimer) {
	gauges := descs(nil, []gaugeDef{
		{DelayRabbitMQConnected, "1 while the RabbitMQ timer's connections are up with their topology declared (the consumer's too, while the dispatcher runs)."},
		{DelayRabbitMQHeld, "Messages this dispatcher holds unacknowledged: due within a second, or being run."},
	})
	totals := descs(nil, []gaugeDef{
		{DelayRabbitMQPublishedTotal, "Delayed-task messages the broker confirmed (registrations, rescheduling, the reconciler)."},
		{DelayRabbitMQRepublished, "Of those, published again by the reconciler (never confirmed, or overdue and long published)."},
		{DelayRabbitMQHopsTotal, "Messages sent on to their next delay tier."},
		{DelayRabbitMQDuplicatesTotal, "Messages of tasks already claimed or no longer PENDING, dropped at the claim."},
		{DelayRabbitMQFailuresTotal, "Publishes the broker did not confirm; their tasks wait for the reconciler."},
		{DelayRabbitMQReconnectsTotal, "Connections to RabbitMQ re-established after a loss."},
	})
	m.reg.MustRegister(collectorFunc{descs: append(gauges, totals...), collect: func(ch chan<- prometheus.Metric) {
		s := t.Stats()
		connected := 0.0
		if s.Connected && (s.Consuming || !t.Consumes()) {
			connected = 1
		}
		for i, v := range [...]float64{connected, float64(s.Held)} {
			ch <- prometheus.MustNewConstMetric(gauges[i], prometheus.GaugeValue, v)
		}
		for i, n := range [...]int64{s.Published, s.Republished, s.Hops, s.Duplicates, s.Failures, s.Reconnects} {
			ch <- prometheus.MustNewConstMetric(totals[i], prometheus.CounterValue, float64(n))
		}
	}})
}
