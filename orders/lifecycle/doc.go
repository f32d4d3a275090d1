// Package lifecycle runs the jobs of the order lifecycle after payment:
// Jobs.AutoConfirm (orderAutoConfirmJob) completes the orders buyers did
// not confirm, and Jobs.FlagOverdue (orderFulfillmentTimeoutJob) flags
// the orders merchants did not ship.
//
// The statuses (order_info.status):
//
//	0 unpaid ──pay──► 1 paid ──ship──► 3 shipped ──confirm / auto-confirm──► 4 completed
//	   └──timeout close──► 2 closed      │
//	                                     └─ not shipped within fulfillment_timeout_days:
//	                                        flagged in order_fulfillment_overdue (no state change)
//
// pay_time, ship_time and complete_time record the database time of each
// step. The order service ships and the buyer confirms (payment.Service's
// Ship and Confirm); this package only completes and flags what is overdue.
// Both jobs judge time by the database clock, read once per run, and every
// change is a conditional statement that repeats what the scan saw, so
// runs may overlap on the same or other shards, in this process or others.
//
// The package reads and writes the order table (order_info, or one of
// order.sources' tables: Config.Table) and order_fulfillment_overdue only;
// it imports nothing of package orders. Sweep runs a job over many such
// units, an order table of one database each, as the close's sweep does.
package lifecycle
