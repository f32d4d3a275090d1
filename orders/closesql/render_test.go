package closesql

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders/schema"
)

// The close path's statements as they were written before they were
// rendered from a schema. TestDefaultSchemaRendersTodaysStatements holds
// the default schema's rendering to them byte for byte, so the plan tests
// that run them run what a Closer without a declared schema runs.
var scanPageSQL = `
SELECT o.id, o.order_no, o.create_time, o.timeout_minutes, o.coupon_id
FROM order_info o FORCE INDEX (idx_status_create_time)
WHERE o.status = 0
  AND (o.create_time > :after_time OR (o.create_time = :after_time AND o.id > :after_id))
  AND o.create_time <= :now
  AND o.create_time + INTERVAL o.timeout_minutes MINUTE <= :now
  AND ` + shard.Match("o.id") + `
ORDER BY o.create_time, o.id
LIMIT :limit`

const lockOrdersSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE id IN (%s) ORDER BY id FOR UPDATE`

const orderByNoSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE order_no = ?`

const orderItemsSQL = `SELECT order_no, sku_id, quantity FROM order_item FORCE INDEX (idx_order_no) WHERE order_no IN (?)`

const lockStockSQL = `
SELECT sku_id, available, locked FROM inventory
WHERE sku_id IN (%s) ORDER BY sku_id FOR UPDATE`

const lockCouponsSQL = `
SELECT id, status, order_no FROM user_coupon
WHERE id IN (%s) ORDER BY id FOR UPDATE`

const closeOrdersSQL = `
UPDATE order_info FORCE INDEX (PRIMARY) SET status = 2, close_time = :close_time, close_reason = :close_reason
WHERE id IN (%s) AND status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= :now`

const releaseStockSQL = `
UPDATE inventory
SET available = available + %[1]s, locked = locked - %[1]s
WHERE sku_id IN (%[2]s) AND locked >= %[1]s`

const restoreCouponsSQL = `
UPDATE user_coupon SET status = 0, order_no = NULL
WHERE id IN (%s) AND status = 1 AND order_no IN (:order_nos)`

const ordersForCloseSQL = `
SELECT o.id, o.order_no, o.status, o.create_time, o.timeout_minutes, o.coupon_id,
       COALESCE(d.status, '') AS letter_status
FROM order_info o FORCE INDEX (uk_order_no)
LEFT JOIN order_dead_letter d FORCE INDEX (uk_order_stage) ON d.order_no = o.order_no AND d.stage = 'close'
WHERE o.order_no IN (?)`

const readOrdersSQL = `
SELECT id, order_no, status, create_time, timeout_minutes, coupon_id
FROM order_info WHERE id IN (%s)`

const overdueSQL = `
SELECT COUNT(*) AS n, MIN(t.deadline) AS oldest
FROM (
  SELECT o.order_no, o.create_time + INTERVAL o.timeout_minutes MINUTE AS deadline
  FROM order_info o FORCE INDEX (idx_status_create_time)
  WHERE o.status = 0 AND o.create_time <= :now
  ORDER BY o.create_time, o.id
  LIMIT :cap
) t
LEFT JOIN order_dead_letter d FORCE INDEX (uk_order_stage)
  ON d.order_no = t.order_no AND d.stage = 'close'
 AND (d.status = 'parked' OR (d.status = 'waiting' AND d.next_retry_at > :now))
WHERE t.deadline <= :now AND d.id IS NULL`

// TestDefaultSchemaRendersTodaysStatements: a Closer without a declared
// schema runs exactly the statements it ran before schemas existed, and
// so keeps their plans, measured rates and plan-test entries.
func TestDefaultSchemaRendersTodaysStatements(t *testing.T) {
	t.Parallel()
	got, err := Render(schema.Default())
	require.NoError(t, err)
	for _, c := range []struct{ name, got, want string }{
		{"scan page", got.ScanPage, scanPageSQL},
		{"lock orders", got.LockOrders, lockOrdersSQL},
		{"read orders", got.ReadOrders, readOrdersSQL},
		{"order by number", got.OrderByNo, orderByNoSQL},
		{"orders for close", got.OrdersForClose, ordersForCloseSQL},
		{"order items", got.OrderItems, orderItemsSQL},
		{"close orders", got.CloseOrders, closeOrdersSQL},
		{"overdue", got.Overdue, overdueSQL},
		{"lock stock", got.Stock.Lock, lockStockSQL},
		{"release stock", got.Stock.Release, releaseStockSQL},
		{"lock coupons", got.Coupon.Lock, lockCouponsSQL},
		{"restore coupons", got.Coupon.Restore, restoreCouponsSQL},
	} {
		require.Equal(t, c.want, c.got, c.name)
	}
	require.Equal(t, "sku_id", got.Stock.Key)
	require.Nil(t, got.Extra)
	require.False(t, got.ItemsByID)
	require.Equal(t, "order not found in order_info", got.OrderGone)

	// A Closer built without a schema renders the same.
	require.Equal(t, Default, got)
}

// TestDueTimeIsTheDeadline: a schema naming each order's deadline
// (schema.Orders.DueTime) renders it where the others render create time
// plus timeout, with no interval: the scan's keyset and range, the close's
// guard and the gauge's deadline; the rows carry it as create_time with a
// timeout of 0.
func TestDueTimeIsTheDeadline(t *testing.T) {
	t.Parallel()
	s := schema.Schema{Declared: true,
		Orders: schema.Orders{Table: "order", ScanIndex: "idx_status_expire", ID: "id", OrderNo: "sn", Status: "state",
			DueTime: "expire_at", Unpaid: schema.Int(0), Closed: schema.Int(9)},
		Items: schema.Items{Table: "line", Index: "idx_sn", OrderColumn: "sn", SKU: "goods", Quantity: "num"}}
	got, err := Render(s)
	require.NoError(t, err)
	require.Equal(t, "\nSELECT o.`id` AS id, o.`sn` AS order_no, COALESCE(o.`expire_at`, CAST('9999-12-31' AS DATETIME)) AS create_time, "+
		"0 AS timeout_minutes, NULL AS coupon_id\n"+
		"FROM `order` o FORCE INDEX (`idx_status_expire`)\n"+
		"WHERE o.`state` = 0\n"+
		"  AND (o.`expire_at` > :after_time OR (o.`expire_at` = :after_time AND o.`id` > :after_id))\n"+
		"  AND o.`expire_at` <= :now\n"+
		"  AND "+shard.Match("o.`id`")+"\n"+
		"ORDER BY o.`expire_at`, o.`id`\nLIMIT :limit", got.ScanPage)
	require.Equal(t, "\nUPDATE `order` FORCE INDEX (PRIMARY) SET `state` = 9\n"+
		"WHERE `id` IN (%s) AND `state` = 0 AND `expire_at` <= :now", got.CloseOrders)
	require.Contains(t, got.LockOrders, "COALESCE(`expire_at`, CAST('9999-12-31' AS DATETIME)) AS create_time, 0 AS timeout_minutes",
		"a NULL deadline, never due, reads as the latest time")
	require.Contains(t, got.Overdue, "  SELECT o.`sn` AS order_no, o.`expire_at` AS deadline\n"+
		"  FROM `order` o FORCE INDEX (`idx_status_expire`)\n"+
		"  WHERE o.`state` = 0 AND o.`expire_at` <= :now\n"+
		"  ORDER BY o.`expire_at`, o.`id`\n")

	s.Orders.TimeoutMinutes = 15
	_, err = Render(s)
	require.ErrorContains(t, err, "dueTime: the order's deadline is its dueTime")
}
