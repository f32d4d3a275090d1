// Package orderstatus holds the values of order_info.status: the one place
// the close path, the payment side, the lifecycle jobs and the demo data
// take them from.
package orderstatus

// The values of order_info.status. An order starts unpaid and ends closed
// (never paid in time) or, once paid, shipped and completed.
const (
	Unpaid    = 0 // placed, waiting for payment: what the close job looks for
	Paid      = 1 // paid (pay_time)
	Closed    = 2 // closed unpaid (close_time, close_reason)
	Shipped   = 3 // shipped (ship_time)
	Completed = 4 // completed (complete_time)
)
