package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/orders/outbox"
)

// Metric names of the outbox relay (compensation mode outbox).
const (
	OutboxPending          = "orders_outbox_pending"
	OutboxOldestPendingAge = "orders_outbox_oldest_pending_age_seconds"
	OutboxDeliveriesTotal  = "orders_outbox_deliveries_total"
	OutboxParked           = "orders_outbox_parked"
	OutboxClaimsLostTotal  = "orders_outbox_claims_lost_total"
	OutboxPassErrorsTotal  = "orders_outbox_pass_errors_total"
)

// WatchRelay exports the delivery totals of r, the relay of the order
// source named source ("default" without order.sources), and samples its
// database's outbox backlog (all executors' relays' events) at most every
// SampleInterval. Every series carries source, so each database's relays
// are told apart; call it once per relay.
func (m *Metrics) WatchRelay(source string, r *outbox.Relay) {
	src := prometheus.Labels{"source": source}
	deliveries := prometheus.NewDesc(OutboxDeliveriesTotal,
		"Outbox deliveries by this relay, by result: delivered (acknowledged, marked done), failed (a retry is scheduled), released (claimed, not sent in time, given back), superseded (acknowledged after another relay took the event over), parked (refused for good or out of attempts: an operator must look).",
		[]string{"result"}, src)
	claimsLost := prometheus.NewDesc(OutboxClaimsLostTotal,
		"Outbox claims of this relay rolled back by a deadlock or, on a Galera cluster with relays on several nodes, by another node's claim of the same events; tried again, not an error.",
		nil, src)
	passErrors := prometheus.NewDesc(OutboxPassErrorsTotal,
		"Passes of this relay that ended with an error (its claim or a bookkeeping write failed, most often because its database does not answer); it keeps polling.",
		nil, src)
	m.reg.MustRegister(collectorFunc{descs: []*prometheus.Desc{deliveries, claimsLost, passErrors}, collect: func(ch chan<- prometheus.Metric) {
		s := r.Stats()
		results := [...]labelled{{"delivered", s.Delivered}, {"failed", s.Failed}, {"released", s.Released},
			{"superseded", s.Superseded}, {"parked", s.Parked}}
		for _, d := range results {
			ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(d.n), d.label)
		}
		ch <- prometheus.MustNewConstMetric(claimsLost, prometheus.CounterValue, float64(s.ClaimsLost))
		ch <- prometheus.MustNewConstMetric(passErrors, prometheus.CounterValue, float64(s.PassErrors))
	}})
	m.reg.MustRegister(gaugeSampler(m, samplerName("outbox", source), src, []gaugeDef{
		{OutboxPending, "Outbox events not yet delivered to the inventory and coupon services, all relays' (sampled)."},
		{OutboxOldestPendingAge, "How long ago the oldest undelivered outbox event was written (0: none; sampled)."},
		{OutboxParked, "Outbox events the relays stopped trying (a permanent answer, or outbox.maxAttempts failures): an operator must look and requeue (sampled)."},
	}, r.Backlog, func(b outbox.Backlog) []float64 {
		return []float64{float64(b.Pending), b.OldestAge.Seconds(), float64(b.Parked)}
	}))
}

// labelled is a count with the label value it is exported under.
type labelled struct {
	label string
	n     int
}

// collectorFunc is a prometheus.Collector made of its descriptions and a
// function, for series computed at scrape time from a part's own counters.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
