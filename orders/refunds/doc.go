// Package refunds is the operators' side of payment_conflict: the refunds
// the business owes for payments that could not be taken (a late payment
// of a closed order, a second payment of a paid one). Ops lists, pages and
// sums them up and records a refund; the CLI (executor refunds), the API
// port, the console and the metrics all read them through it, so they say
// the same. OfOrder gives the order view one order's conflicts.
//
// It needs only the database (no Redis) and imports nothing of package
// orders. The payment side (package payment) writes the rows, inside the
// transaction of the payment it records.
package refunds
