// Package orderdemo fills the order tables with demo data: orders as the
// order service would have left them (stock moved from available to locked,
// coupons locked by unpaid orders, paid orders' stock consumed and coupons
// used), for `executor demo-data`, the benchmarks and tests that need many
// orders. Its Reset empties those tables only when every row in them is one
// it made, or when the caller names the database.
package orderdemo
