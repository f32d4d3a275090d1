package metrics

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/xxljob"
)

// Metric names of the order close path.
const (
	OrdersScannedTotal       = "orders_close_scanned_total"
	OrdersClosedTotal        = "orders_close_closed_total"
	OrdersSkippedTotal       = "orders_close_skipped_total"
	OrdersFailedTotal        = "orders_close_failed_total"
	OrdersLatenessSeconds    = "orders_close_lateness_seconds"
	OrdersLockAcquireSeconds = "orders_lock_acquire_duration_seconds"
	OrdersLockKeysTotal      = "orders_lock_keys_total"
	OrdersOverdueUnpaid      = "orders_overdue_unpaid"
	OrdersOverdueOldestAge   = "orders_overdue_unpaid_oldest_age_seconds"
	OrdersDeadLetters        = "orders_dead_letters"
	OrdersTradeErrorsTotal   = "orders_close_trade_errors_total"
	OrdersConflictsTotal     = "orders_close_conflicts_total"
)

type orderMetrics struct {
	scanned, closed, failed *prometheus.CounterVec
	skipped                 *prometheus.CounterVec
	tradeErrors             *prometheus.CounterVec
	conflicts               *prometheus.CounterVec
	lateness                *prometheus.HistogramVec
	lockDuration            prometheus.Histogram
	lockKeys                *prometheus.CounterVec
	lockAcquired            prometheus.Counter
	lockTaken               prometheus.Counter
	lockError               prometheus.Counter
}

func newOrderMetrics(m *Metrics) orderMetrics {
	// The close path's counters share their labels: the caller
	// (handlerOf), the shard, and where the orders are.
	closeCounter := func(name, help string) *prometheus.CounterVec {
		return m.counterVec(name, help, "handler", "shard", "source", "table")
	}
	o := orderMetrics{
		scanned:     closeCounter(OrdersScannedTotal, "Due orders the close path looked at, by handler, shard, order source and table (dry runs not counted)."),
		closed:      closeCounter(OrdersClosedTotal, "Orders closed (stock and coupon given back), by handler, shard, order source and table."),
		tradeErrors: closeCounter(OrdersTradeErrorsTotal, "Orders left open because the payment side's close-trade call failed (order.payment.closeURL), by handler, shard, order source and table; counted within skipped reason locked."),
		conflicts:   closeCounter(OrdersConflictsTotal, "Close transactions rolled back because other transactions held or changed their rows (deadlock, lock wait, or a Galera certification conflict), by handler, shard, order source and table; retried or skipped, never dead-lettered."),
		failed:      closeCounter(OrdersFailedTotal, "Orders whose close failed and went to order_dead_letter, by handler, shard, order source and table."),
		skipped: m.counterVec(OrdersSkippedTotal,
			"Orders looked at and left as they are, by handler, shard, order source and table, and reason: paid (paid first), locked (lock held elsewhere, Redis failing or lease lost), closed (closed by someone else), not_due, parked (dead letter parked).",
			"handler", "shard", "source", "table", "reason"),
		lateness: m.histogramVec(OrdersLatenessSeconds,
			"Time from an order's payment deadline to its close, on the database clock, by handler.",
			[]float64{.1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}, "handler"),
		lockKeys: m.counterVec(OrdersLockKeysTotal,
			"Order locks asked for, by result: acquired, taken (held by someone else: contention), error (Redis failed).", "result"),
	}
	o.lockDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    OrdersLockAcquireSeconds,
		Help:    "Latency of one bulk lock acquisition (a page's locks, pipelined per Redis node).",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2},
	})
	m.reg.MustRegister(o.lockDuration)
	m.define(OrdersLockAcquireSeconds, kindHistogram)
	m.define(OrdersOverdueUnpaid, kindGauge)
	m.define(OrdersOverdueOldestAge, kindGauge)
	m.define(OrdersDeadLetters, kindGauge)
	o.lockAcquired = o.lockKeys.WithLabelValues("acquired")
	o.lockTaken = o.lockKeys.WithLabelValues("taken")
	o.lockError = o.lockKeys.WithLabelValues("error")
	return o
}

// Orders returns the observer for orders.CloserConfig.Observer and
// orderlock.Config.Observer.
func (m *Metrics) Orders() orders.Observer { return orderObserver{&m.orders} }

// WatchOrders samples, at most every SampleInterval, the overdue orders
// of each of units (a Closer of each order table the close sweeps,
// labelled with its source and table as the close counters are) and the
// dead letters of each order database, read through the first of letters
// of each source and labelled with it. Each source is read on a sampler
// of its own, its units and its letters together: "orders" for the
// default source (mysql.dsn's without order.sources), "orders:SOURCE"
// for another (as a source's outbox is "outbox:SOURCE"), so one that does
// not answer leaves the others' gauges fresh.
func (m *Metrics) WatchOrders(units, letters []*orders.Closer) {
	var sources []*sourceOrders
	of := func(c *orders.Closer) *sourceOrders {
		for _, s := range sources {
			if s.name == c.Source() {
				return s
			}
		}
		s := &sourceOrders{name: c.Source()}
		sources = append(sources, s)
		return s
	}
	for _, u := range units {
		s := of(u)
		s.units = append(s.units, u)
	}
	for _, l := range letters {
		if s := of(l); s.letters == nil {
			s.letters = l
		}
	}
	for _, s := range sources {
		m.reg.MustRegister(s.sampler(m))
	}
}

// sourceOrders is what one order source's sampler reads: the overdue
// orders of its units, and its database's dead letters through letters
// (none when nil).
type sourceOrders struct {
	name    string
	units   []*orders.Closer
	letters *orders.Closer
}

// sampler reads s's gauges, "orders" or "orders:SOURCE" (WatchOrders).
func (s *sourceOrders) sampler(m *Metrics) *sampler {
	source := prometheus.Labels{"source": s.name}
	overdue := prometheus.NewDesc(OrdersOverdueUnpaid,
		"Unpaid orders past their deadline that the sweep would close, by order source and table (capped at 10000 per table; sampled).",
		[]string{"table"}, source)
	age := prometheus.NewDesc(OrdersOverdueOldestAge,
		"How long ago the earliest deadline among the overdue unpaid orders passed, by order source and table (0: none; sampled).",
		[]string{"table"}, source)
	var descs []*prometheus.Desc
	if len(s.units) > 0 {
		descs = append(descs, overdue, age)
	}
	var letters *prometheus.Desc
	if s.letters != nil {
		letters = deadLettersDesc(s.name)
		descs = append(descs, letters)
	}
	return m.newSampler(samplerName("orders", s.name), m.cfg.SampleInterval, descs, func(ctx context.Context) ([]prometheus.Metric, error) {
		var out []prometheus.Metric
		for _, u := range s.units {
			n, oldest, err := u.Overdue(ctx)
			if err != nil {
				return nil, fmt.Errorf("order table %s: %w", u.Table(), err)
			}
			out = append(out, prometheus.MustNewConstMetric(overdue, prometheus.GaugeValue, float64(n), u.Table()),
				prometheus.MustNewConstMetric(age, prometheus.GaugeValue, oldest.Seconds(), u.Table()))
		}
		if letters == nil {
			return out, nil
		}
		dl, err := deadLetterGauges(ctx, letters, s.letters)
		return append(out, dl...), err
	})
}

// deadLettersDesc is orders_dead_letters of one order source's database.
func deadLettersDesc(source string) *prometheus.Desc {
	return prometheus.NewDesc(OrdersDeadLetters,
		"Dead letters not resolved, by order source, stage and status (waiting: retried later; parked: needs a person; sampled).",
		[]string{"stage", "status"}, prometheus.Labels{"source": source})
}

// deadLetterGauges reads the dead-letter tallies of c's database. The
// close stage's two statuses always appear (0 when none), so dashboards
// show 0 rather than no data.
func deadLetterGauges(ctx context.Context, d *prometheus.Desc, c *orders.Closer) ([]prometheus.Metric, error) {
	tallies, err := c.DeadLetterTallies(ctx)
	if err != nil {
		return nil, err
	}
	var out []prometheus.Metric
	seen := map[[2]string]bool{}
	for _, t := range tallies {
		seen[[2]string{t.Stage, t.Status}] = true
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(t.N), t.Stage, t.Status))
	}
	for _, st := range []string{"waiting", "parked"} {
		if !seen[[2]string{"close", st}] {
			out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 0, "close", st))
		}
	}
	return out, nil
}

type orderObserver struct{ o *orderMetrics }

// handlerOf labels the caller of the close path: the XXL-JOB handler whose
// run ctx belongs to, "delay" for a delayed task, "other" otherwise.
func handlerOf(ctx context.Context) string {
	if r, ok := xxljob.RunFromContext(ctx); ok {
		return r.Handler
	}
	if delay.TraceID(ctx) != "" {
		return "delay"
	}
	return "other"
}

func (ob orderObserver) ClosePage(ctx context.Context, p orders.PageReport) {
	if p.DryRun {
		return // nothing was changed
	}
	o, l := ob.o, []string{handlerOf(ctx), strconv.Itoa(p.ShardIndex), p.Source, p.Table}
	o.scanned.WithLabelValues(l...).Add(float64(p.Scanned))
	o.closed.WithLabelValues(l...).Add(float64(p.Closed))
	o.failed.WithLabelValues(l...).Add(float64(p.DeadLettered))
	skipped := [...]labelled{{"paid", p.SkippedPaid}, {"locked", p.SkippedLocked}, {"closed", p.SkippedClosed},
		{"not_due", p.SkippedNotDue}, {"parked", p.SkippedParked}}
	for _, s := range skipped {
		o.skipped.WithLabelValues(append(l, s.label)...).Add(float64(s.n))
	}
	if p.TradeErrors > 0 {
		o.tradeErrors.WithLabelValues(l...).Add(float64(p.TradeErrors))
	}
	if p.Conflicts > 0 {
		o.conflicts.WithLabelValues(l...).Add(float64(p.Conflicts))
	}
}

func (ob orderObserver) OrdersClosed(ctx context.Context, lateness []time.Duration) {
	h := ob.o.lateness.WithLabelValues(handlerOf(ctx))
	for _, l := range lateness {
		h.Observe(l.Seconds())
	}
}

func (ob orderObserver) LocksAcquired(_ context.Context, l orderlock.Report) {
	o := ob.o
	o.lockDuration.Observe(l.Duration.Seconds())
	o.lockAcquired.Add(float64(l.Held))
	o.lockTaken.Add(float64(l.Taken))
	o.lockError.Add(float64(l.Failed))
}
