// Package outbox delivers the compensation events of outbox mode and shows
// them to operators.
//
// With orders.CloserConfig.Compensation = orders.CompensateOutbox, the close
// transaction leaves local stock and coupons alone and writes stock.release
// and coupon.restore events (StockReleaseEvent, CouponRestoreEvent) into
// order_outbox instead, through Insert, so an event exists exactly when its
// close committed. A Relay delivers them after commit, at least once, each
// until acknowledged, with an Idempotency-Key receivers dedupe on; an event
// refused for good (a 4xx that retrying cannot change) or failing
// MaxAttempts times is parked for an operator. Ops is the operators' view:
// it lists, shows, counts and requeues events (the CLI's executor outbox,
// the API port, the console and the gauges), and OfOrder gives the order
// view an order's events.
//
// Package orders imports this one for the vocabulary and the insert; this
// package imports nothing of orders.
package outbox
