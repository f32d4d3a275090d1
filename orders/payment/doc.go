// Package payment is the order service's side of the rules the close path
// in package orders enforces, and the close's call to the payment side:
//
//   - Service: PlaceOrder, Pay and PayWith, Ship and Confirm (and
//     IssueCoupon, AddStock to stock a shop). It locks an order under the
//     key the close path locks ({prefix}order:close:{orderNo}, an
//     orderlock.Locker) and takes row locks in the close's order (order
//     row, inventory by ascending sku_id, coupon), so a payment and a close
//     of the same order exclude each other, and the status CAS on both
//     sides decides which one wins.
//   - HTTPTradeCloser: the orders.TradeCloser that closes an order's trade
//     at the payment side over HTTP before the close (see its contract).
//
// # Late and duplicate payments
//
// A payment that loses to the close (PayWith finds the order closed), or a
// second, distinct payment of a paid order, leaves the order as it is and
// records the payment in payment_conflict, once per payment id: a refund is
// owed (package refunds lists them and records refunds). Pay, without a
// payment id, is PayWith with one derived from the order number. When
// Redis is unreachable, payments go on under the row lock and status CAS.
//
// # After payment
//
// Statuses 3 (shipped, ship_time) and 4 (completed, complete_time) follow
// paid (1, pay_time). Service.Ship and Service.Confirm are the order
// service's steps (ship.go); package lifecycle completes orders shipped long
// enough ago and flags paid orders not shipped in time.
//
// The package imports orders for the trade step's interface and results and
// for ErrOrderNotFound and ErrLeaseExpired; orders imports nothing of it.
package payment
