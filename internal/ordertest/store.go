package ordertest

// The checker's SQL. All reads, no locks (plain consistent reads).

// inventorySQL reads every inventory row.
const inventorySQL = `SELECT sku_id, available, locked FROM inventory`

// itemQuantitiesSQL sums item quantities per SKU of unpaid (0) and paid
// orders (1, and the states after it: 3 shipped, 4 completed).
const itemQuantitiesSQL = `
SELECT it.sku_id, o.status, SUM(it.quantity) AS qty
FROM order_item it JOIN order_info o ON o.order_no = it.order_no
WHERE o.status IN (0, 1, 3, 4)
GROUP BY it.sku_id, o.status`

// paidIDsSQL lists the paid orders.
const paidIDsSQL = `SELECT id FROM order_info WHERE status = 1 ORDER BY id`

// paidNoLongerPaidSQL returns the orders of an id list (sqlx.In) neither
// paid nor further on (shipped, completed).
const paidNoLongerPaidSQL = `SELECT order_no FROM order_info WHERE id IN (?) AND status NOT IN (1, 3, 4)`

// countsSQL counts orders by status, and the unpaid ones due by NOW().
const countsSQL = `
SELECT COALESCE(SUM(status = 0), 0) AS unpaid,
       COALESCE(SUM(status = 1), 0) AS paid,
       COALESCE(SUM(status = 2), 0) AS closed,
       COALESCE(SUM(status = 3), 0) AS shipped,
       COALESCE(SUM(status = 4), 0) AS completed,
       COALESCE(SUM(status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= NOW()), 0) AS due
FROM order_info`

// orderRules are invariants over orders, close logs and coupons: each query
// returns one order_no column per offending row; none must come back.
var orderRules = []struct{ name, what, query string }{
	{"closed_without_log", "closed orders without a close-log row", `
SELECT o.order_no FROM order_info o
LEFT JOIN order_close_log l ON l.order_no = o.order_no
WHERE o.status = 2 AND l.id IS NULL`},
	{"close_log_duplicate", "orders with more than one close-log row", `
SELECT order_no FROM order_close_log GROUP BY order_no HAVING COUNT(*) > 1`},
	{"close_log_not_closed", "close-log rows whose order is not closed", `
SELECT l.order_no FROM order_close_log l
LEFT JOIN order_info o ON o.order_no = l.order_no
WHERE o.id IS NULL OR o.status <> 2`},
	{"closed_without_time", "closed orders without close_time or close_reason", `
SELECT order_no FROM order_info WHERE status = 2 AND (close_time IS NULL OR close_reason IS NULL)`},
	{"closed_coupon_held", "closed orders whose coupon is still held by them (not back to unused)", `
SELECT o.order_no FROM order_info o JOIN user_coupon c ON c.id = o.coupon_id
WHERE o.status = 2 AND (c.order_no = o.order_no OR (c.order_no IS NULL AND c.status <> 0))`},
	{"coupon_locked_not_unpaid", "coupons locked (status 1) by an order that is not unpaid", `
SELECT COALESCE(c.order_no, CONCAT('coupon ', c.id)) AS order_no FROM user_coupon c
LEFT JOIN order_info o ON o.order_no = c.order_no
WHERE c.status = 1 AND (o.id IS NULL OR o.status <> 0)`},
	{"coupon_used_not_paid", "coupons used (status 2) by an order that is not paid", `
SELECT COALESCE(c.order_no, CONCAT('coupon ', c.id)) AS order_no FROM user_coupon c
LEFT JOIN order_info o ON o.order_no = c.order_no
WHERE c.status = 2 AND (o.id IS NULL OR o.status NOT IN (1, 3, 4))`},
	{"unpaid_coupon_not_locked", "unpaid orders whose coupon is not locked by them", `
SELECT o.order_no FROM order_info o LEFT JOIN user_coupon c ON c.id = o.coupon_id
WHERE o.status = 0 AND o.coupon_id IS NOT NULL
  AND (c.id IS NULL OR c.status <> 1 OR NOT (c.order_no <=> o.order_no))`},
	{"paid_coupon_not_used", "paid orders whose coupon is not used by them", `
SELECT o.order_no FROM order_info o LEFT JOIN user_coupon c ON c.id = o.coupon_id
WHERE o.status IN (1, 3, 4) AND o.coupon_id IS NOT NULL
  AND (c.id IS NULL OR c.status <> 2 OR NOT (c.order_no <=> o.order_no))`},
}
