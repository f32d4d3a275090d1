package metrics

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderjob/executor/orders/refunds"
)

// Metric names of the refunds owed (payment_conflict).
const (
	OrdersPaymentConflicts     = "orders_payment_conflicts"
	OrdersRefundsOwed          = "orders_refunds_owed"
	OrdersRefundsOwedAmount    = "orders_refunds_owed_amount"
	OrdersRefundsOwedOldestAge = "orders_refunds_owed_oldest_age_seconds"
)

// WatchRefunds samples the refunds owed (the same figures executor refunds
// owed prints) at most every SampleInterval.
func (m *Metrics) WatchRefunds(r *refunds.Ops) {
	total := prometheus.NewDesc(OrdersPaymentConflicts,
		"Payments recorded in payment_conflict, refunded or not: late payments of closed orders and second payments of paid ones, one per payment id (sampled).", nil, nil)
	owed := prometheus.NewDesc(OrdersRefundsOwed,
		"Payments in payment_conflict not yet recorded as refunded (sampled).", nil, nil)
	amount := prometheus.NewDesc(OrdersRefundsOwedAmount,
		"Sum of the payments owed back, in the currency's main unit (sampled).", nil, nil)
	oldest := prometheus.NewDesc(OrdersRefundsOwedOldestAge,
		"How long ago the oldest payment still owed back was recorded (0: none; sampled).", nil, nil)
	m.reg.MustRegister(m.newSampler("refunds", m.cfg.SampleInterval, []*prometheus.Desc{total, owed, amount, oldest},
		func(ctx context.Context) ([]prometheus.Metric, error) {
			o, err := r.Owed(ctx)
			if err != nil {
				return nil, err
			}
			sum, err := strconv.ParseFloat(o.Amount, 64)
			if err != nil {
				sum = 0 // DECIMAL text always parses; keep the other figures
			}
			return []prometheus.Metric{
				prometheus.MustNewConstMetric(total, prometheus.GaugeValue, float64(o.Total)),
				prometheus.MustNewConstMetric(owed, prometheus.GaugeValue, float64(o.Count)),
				prometheus.MustNewConstMetric(amount, prometheus.GaugeValue, sum),
				prometheus.MustNewConstMetric(oldest, prometheus.GaugeValue, o.OldestAge.Seconds()),
			}, nil
		}))
}
