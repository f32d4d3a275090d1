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

	tasks, due, oldestAge, stuck *prometheus.Desc
}

func newDelayMetrics(m *Metrics) delayMetrics {
	d := delayMetrics{
		attempts: m.counterVec(DelayAttemptsTotal,
			"Attempts of delayed tasks, by handler and result (done, retry, failed, released, lost, not_now, not_due).", "handler", "result"),
		lateness: m.histogramVec(DelayLatenessSeconds,
			"Time from a delayed task's due time to the start of its attempt, on the database clock, by handler.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}, "handler"),
		tasks: prometheus.NewDesc(DelayTasks, "Delayed tasks in job_delay_task, by status (sampled).", []string{"status"}, nil),
		due: prometheus.NewDesc(DelayTasksDue,
			"PENDING delayed tasks already due: the backlog (sampled).", nil, nil),
		oldestAge: prometheus.NewDesc(DelayTasksOldestDueAge,
			"How long the oldest due PENDING task has been due (0: none; sampled).", nil, nil),
		stuck: prometheus.NewDesc(DelayTasksStuckRunning,
			"Tasks RUNNING longer than the running timeout, waiting to be recovered (sampled).", nil, nil),
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

// WatchDispatcher exports d's claim and recovery totals, and samples its
// table (counts by status, backlog, stuck claims) at most every
// DelaySampleInterval.
func (m *Metrics) WatchDispatcher(d *delay.Dispatcher) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: DelayClaimsTotal, Help: "Delayed tasks claimed by this dispatcher (timer and sweep).",
		}, func() float64 { return float64(d.Counters().Claimed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: DelayRecoveredTotal, Help: "Stuck RUNNING tasks this dispatcher recovered (to PENDING or FAILED).",
		}, func() float64 { return float64(d.Counters().Recovered) }),
	)
	dm := &m.delay
	c := d.Client()
	m.reg.MustRegister(m.newSampler("delay", m.cfg.DelaySampleInterval,
		[]*prometheus.Desc{dm.tasks, dm.due, dm.oldestAge, dm.stuck},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			s, err := c.Stats(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]prometheus.Metric, 0, len(delay.Statuses)+3)
			for _, st := range delay.Statuses {
				out = append(out, prometheus.MustNewConstMetric(dm.tasks, prometheus.GaugeValue, float64(s.Counts[st]), string(st)))
			}
			return append(out,
				prometheus.MustNewConstMetric(dm.due, prometheus.GaugeValue, float64(s.DueNow)),
				prometheus.MustNewConstMetric(dm.oldestAge, prometheus.GaugeValue, max(time.Duration(s.OldestDueAge), 0).Seconds()),
				prometheus.MustNewConstMetric(dm.stuck, prometheus.GaugeValue, float64(s.StuckRunning)),
			), nil
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
