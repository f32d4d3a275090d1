// Package orders closes unpaid orders whose payment timeout has passed.
// The order service's side of the same rules (placing, paying, shipping an
// order) is package payment, which shares its lock key and lock order.
//
// It holds:
//
//   - the close path: Closer.Run (the sweep), CloseOrder and CloseOrders
//     (delayed tasks), the close transaction with its compensation, local
//     or through outbox events, and the dead letters it writes and resolves;
//   - the retry path: Closer.RetryDeadLetters replays due dead letters;
//   - the payment step: a TradeCloser asked before a page is closed
//     (payment.HTTPTradeCloser).
//
// Its locks are package orderlock's, the dead-letter operators' view is
// package deadletters, the refunds owed package refunds, the lifecycle jobs
// after payment (auto-confirm, fulfilment flags) are package lifecycle,
// outbox mode's events, their relay and their operators' view are package
// outbox, the coupon giveback (which copy an order gets, which coupons are
// not as a close expects) is package coupon, the lists' shared terms are
// package oplist and the status values package orderstatus; none of them
// imports this package. The order service (package payment), the
// operators' order view and the records of close runs (written by
// Closer.Run; package inspect) import this one; this one never imports
// them.
//
// How a close works (when an order is due, what a close changes, a run's
// walk over the table, the guarded close and its one fallback, dead
// letters, the locks, the payment step and outbox compensation) is told in
// docs/closing-orders.md.
package orders
