package metrics

import (
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
// owed prints) in r, the payment_conflict table of the order database
// named source ("default" for mysql.dsn's when no order source is on it),
// at most every SampleInterval. Every series carries source; each
// database is read on a sampler of its own ("refunds", or
// "refunds:SOURCE"), so one that does not answer leaves the others'
// gauges fresh. Call it once per order database.
func (m *Metrics) WatchRefunds(source string, r *refunds.Ops) {
	m.reg.MustRegister(gaugeSampler(m, samplerName("refunds", source), prometheus.Labels{"source": source}, []gaugeDef{
		{OrdersPaymentConflicts, "Payments recorded in payment_conflict, refunded or not: late payments of closed orders and second payments of paid ones, one per payment id, by order database (sampled)."},
		{OrdersRefundsOwed, "Payments in payment_conflict not yet recorded as refunded, by order database (sampled)."},
		{OrdersRefundsOwedAmount, "Sum of the payments owed back, in the currency's main unit, by order database (sampled)."},
		{OrdersRefundsOwedOldestAge, "How long ago the oldest payment still owed back was recorded, by order database (0: none; sampled)."},
	}, r.Owed, func(o refunds.Summary) []float64 {
		sum, err := strconv.ParseFloat(o.Amount, 64)
		if err != nil {
			sum = 0 // DECIMAL text always parses; keep the other figures
		}
		return []float64{float64(o.Total), float64(o.Count), sum, o.OldestAge.Seconds()}
	}))
}
