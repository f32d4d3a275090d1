package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/orders"
)

// Metric names of the outbox relay (compensation mode outbox).
const (
	OutboxPending          = "orders_outbox_pending"
	OutboxOldestPendingAge = "orders_outbox_oldest_pending_age_seconds"
	OutboxDeliveriesTotal  = "orders_outbox_deliveries_total"
	OutboxParked           = "orders_outbox_parked"
	OutboxClaimsLostTotal  = "orders_outbox_claims_lost_total"
)

// outboxResults are the result label values of orders_outbox_deliveries_total.
var outboxResults = []string{"delivered", "failed", "released", "superseded", "parked"}

// WatchRelay exports r's delivery totals and samples the outbox backlog (all
// relays' events) at most every SampleInterval.
func (m *Metrics) WatchRelay(r *orders.Relay) {
	deliveries := prometheus.NewDesc(OutboxDeliveriesTotal,
		"Outbox deliveries by this relay, by result: delivered (acknowledged, marked done), failed (a retry is scheduled), released (claimed, not sent in time, given back), superseded (acknowledged after another relay took the event over), parked (refused for good or out of attempts: an operator must look).",
		[]string{"result"}, nil)
	claimsLost := prometheus.NewDesc(OutboxClaimsLostTotal,
		"Outbox claims of this relay rolled back by a deadlock or, on a Galera cluster with relays on several nodes, by another node's claim of the same events; tried again, not an error.",
		nil, nil)
	m.reg.MustRegister(collectorFunc{descs: []*prometheus.Desc{deliveries, claimsLost}, collect: func(ch chan<- prometheus.Metric) {
		s := r.Stats()
		for i, n := range [...]int{s.Delivered, s.Failed, s.Released, s.Superseded, s.Parked} {
			ch <- prometheus.MustNewConstMetric(deliveries, prometheus.CounterValue, float64(n), outboxResults[i])
		}
		ch <- prometheus.MustNewConstMetric(claimsLost, prometheus.CounterValue, float64(s.ClaimsLost))
	}})
	pending := prometheus.NewDesc(OutboxPending,
		"Outbox events not yet delivered to the inventory and coupon services, all relays' (sampled).", nil, nil)
	oldest := prometheus.NewDesc(OutboxOldestPendingAge,
		"How long ago the oldest undelivered outbox event was written (0: none; sampled).", nil, nil)
	parked := prometheus.NewDesc(OutboxParked,
		"Outbox events the relays stopped trying (a permanent answer, or outbox.maxAttempts failures): an operator must look and requeue (sampled).", nil, nil)
	m.reg.MustRegister(m.newSampler("outbox", m.cfg.SampleInterval, []*prometheus.Desc{pending, oldest, parked},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			b, err := r.Backlog(ctx)
			if err != nil {
				return nil, err
			}
			return []prometheus.Metric{
				prometheus.MustNewConstMetric(pending, prometheus.GaugeValue, float64(b.Pending)),
				prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, b.OldestAge.Seconds()),
				prometheus.MustNewConstMetric(parked, prometheus.GaugeValue, float64(b.Parked)),
			}, nil
		}))
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
