package closesql

import (
	"strings"
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
WHERE id IN (%s) AND status = 1 AND order_no = ELT(FIELD(id, :coupon_ids), :order_nos)`

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

// shopSchema is a declared schema of table `order` (id, sn, state 0
// unpaid and 9 closed) and its lines, with o's scan index and times.
func shopSchema(o schema.Orders) schema.Schema {
	o.Table, o.ID, o.OrderNo, o.Status, o.Unpaid, o.Closed = "order", "id", "sn", "state", schema.Int(0), schema.Int(9)
	return schema.Schema{Declared: true, Orders: o,
		Items: schema.Items{Table: "line", Index: "idx_sn", OrderColumn: "sn", SKU: "goods", Quantity: "num"}}
}

// renderOK renders s, which must render.
func renderOK(t *testing.T, s schema.Schema) *Statements {
	t.Helper()
	got, err := Render(s)
	require.NoError(t, err)
	return got
}

// wantScan is shopSchema's scan page selecting times (create_time and
// timeout_minutes), walking index by at from the cursor time after, with
// the range's end due.
func wantScan(times, index, at, after, due string) string {
	return "\nSELECT o.`id` AS id, o.`sn` AS order_no, " + times + ", NULL AS coupon_id\n" +
		"FROM `order` o FORCE INDEX (`" + index + "`)\n" +
		"WHERE o.`state` = 0\n" +
		"  AND (" + at + " > " + after + " OR (" + at + " = " + after + " AND o.`id` > :after_id))\n" +
		"  AND " + due + "\n" +
		"  AND " + shard.Match("o.`id`") + "\n" +
		"ORDER BY " + at + ", o.`id`\nLIMIT :limit"
}

// TestDueTimeIsTheDeadline: a schema naming each order's deadline
// (schema.Orders.DueTime) renders it where the others render create time
// plus timeout, with no interval: the scan's keyset and range, the close's
// guard and the gauge's deadline; the rows carry it as create_time with a
// timeout of 0.
func TestDueTimeIsTheDeadline(t *testing.T) {
	t.Parallel()
	s := shopSchema(schema.Orders{ScanIndex: "idx_status_expire", DueTime: "expire_at"})
	got := renderOK(t, s)
	require.Equal(t, wantScan("COALESCE(o.`expire_at`, CAST('9999-12-31' AS DATETIME)) AS create_time, 0 AS timeout_minutes",
		"idx_status_expire", "o.`expire_at`", ":after_time", "o.`expire_at` <= :now"), got.ScanPage)
	require.Equal(t, "\nUPDATE `order` FORCE INDEX (PRIMARY) SET `state` = 9\n"+
		"WHERE `id` IN (%s) AND `state` = 0 AND `expire_at` <= :now", got.CloseOrders)
	require.Contains(t, got.LockOrders, "COALESCE(`expire_at`, CAST('9999-12-31' AS DATETIME)) AS create_time, 0 AS timeout_minutes",
		"a NULL deadline, never due, reads as the latest time")
	require.Contains(t, got.Overdue, "  SELECT o.`sn` AS order_no, o.`expire_at` AS deadline\n"+
		"  FROM `order` o FORCE INDEX (`idx_status_expire`)\n"+
		"  WHERE o.`state` = 0 AND o.`expire_at` <= :now\n"+
		"  ORDER BY o.`expire_at`, o.`id`\n")

	s.Orders.TimeoutMinutes = 15
	_, err := Render(s)
	require.ErrorContains(t, err, "dueTime: the order's deadline is its dueTime")
}

// TestEpochTimesCompareTheColumnItself: a schema keeping its times as
// epoch integers (schema.Orders.TimeUnit) compares the shop's columns
// themselves, never wrapped in a function, with parameters converted in
// Go (now_epoch, after_epoch) and timeouts as products in the unit; the
// close stamps close_epoch; and the rows read the times back as the UTC
// date-time of their instant, by arithmetic from 1970-01-01.
func TestEpochTimesCompareTheColumnItself(t *testing.T) {
	t.Parallel()
	s := shopSchema(schema.Orders{ScanIndex: "idx_status_created", CreateTime: "created", TimeoutMinutes: 15,
		CloseTime: "closed_at", UpdateTime: "updated_at", TimeUnit: schema.EpochSeconds})
	got := renderOK(t, s)
	require.Equal(t, wantScan("(CAST('1970-01-01' AS DATETIME) + INTERVAL o.`created` SECOND) AS create_time, 15 AS timeout_minutes",
		"idx_status_created", "o.`created`", ":after_epoch", "o.`created` <= :now_epoch - 900"), got.ScanPage)
	require.Equal(t, "\nUPDATE `order` FORCE INDEX (PRIMARY) SET `state` = 9, `closed_at` = :close_epoch, `updated_at` = :close_epoch\n"+
		"WHERE `id` IN (%s) AND `state` = 0 AND `created` + 15 * 60 <= :now_epoch", got.CloseOrders)
	require.Contains(t, got.Overdue, "SELECT COUNT(*) AS n, (CAST('1970-01-01' AS DATETIME) + INTERVAL MIN(t.deadline) SECOND) AS oldest\n")
	require.Contains(t, got.Overdue, "WHERE o.`state` = 0 AND o.`created` <= :now_epoch\n")
	require.Contains(t, got.Overdue, "d.next_retry_at > :now))\nWHERE t.deadline <= :now_epoch AND d.id IS NULL",
		"dead letters keep the session's wall clock")

	s.Orders.TimeUnit, s.Orders.TimeoutMinutes, s.Orders.TimeoutColumn = schema.EpochMillis, 0, "timeout"
	got = renderOK(t, s)
	require.Contains(t, got.ScanPage, "(CAST('1970-01-01' AS DATETIME(3)) + INTERVAL o.`created` * 1000 MICROSECOND) AS create_time, o.`timeout` AS timeout_minutes")
	require.Contains(t, got.ScanPage, "  AND o.`created` <= :now_epoch\n  AND o.`created` + o.`timeout` * 60000 <= :now_epoch\n")
	require.Contains(t, got.CloseOrders, "AND `created` + `timeout` * 60000 <= :now_epoch")
	v, err := RenderView(s)
	require.NoError(t, err)
	require.Contains(t, v.Order, "(CAST('1970-01-01' AS DATETIME(3)) + INTERVAL `closed_at` * 1000 MICROSECOND) AS close_time")

	s.Orders.CreateTime, s.Orders.TimeoutColumn, s.Orders.DueTime = "", "", "expire"
	got = renderOK(t, s)
	require.Contains(t, got.LockOrders, "COALESCE((CAST('1970-01-01' AS DATETIME(3)) + INTERVAL `expire` * 1000 MICROSECOND), "+
		"CAST('9999-12-31' AS DATETIME)) AS create_time, 0 AS timeout_minutes", "a NULL deadline, never due, reads as the latest time")
	require.Contains(t, got.ScanPage, "  AND o.`expire` <= :now_epoch\n")
	require.Contains(t, got.CloseOrders, "AND `expire` <= :now_epoch")

	s.Orders.TimeUnit = schema.TimeUnit(7)
	_, err = Render(s)
	require.ErrorContains(t, err, "timeUnit: TimeUnit(7) is not one of datetime, epochSeconds, epochMillis")
}

// TestSoftDeleteKeepsDeletedOrdersOpen: a schema naming a soft-delete
// column filters deleted rows out of the scan and the gauge (a row filter:
// the scan keeps its forced index range), repeats liveness in the status
// CAS, and reads a deleted unpaid order as closed wherever an order is read
// by id or number, so no close path takes it. NULL live renders IS NULL.
func TestSoftDeleteKeepsDeletedOrdersOpen(t *testing.T) {
	t.Parallel()
	s := shopSchema(schema.Orders{ScanIndex: "idx_status_created", CreateTime: "created", TimeoutMinutes: 15,
		SoftDelete: schema.SoftDelete{Column: "is_deleted", Live: schema.Int(0)}})
	got := renderOK(t, s)
	require.Equal(t, "\nSELECT o.`id` AS id, o.`sn` AS order_no, o.`created` AS create_time, 15 AS timeout_minutes, NULL AS coupon_id\n"+
		"FROM `order` o FORCE INDEX (`idx_status_created`)\n"+
		"WHERE o.`state` = 0\n"+
		"  AND (o.`created` > :after_time OR (o.`created` = :after_time AND o.`id` > :after_id))\n"+
		"  AND o.`created` <= :now - INTERVAL 15 MINUTE\n"+
		"  AND "+shard.Match("o.`id`")+" AND o.`is_deleted` = 0\n"+
		"ORDER BY o.`created`, o.`id`\nLIMIT :limit", got.ScanPage)
	require.Equal(t, "\nUPDATE `order` FORCE INDEX (PRIMARY) SET `state` = 9\n"+
		"WHERE `id` IN (%s) AND `state` = 0 AND `created` + INTERVAL 15 MINUTE <= :now AND `is_deleted` = 0", got.CloseOrders)
	status := "CASE `state` WHEN 0 THEN IF(`is_deleted` = 0, 0, 2) WHEN 9 THEN 2 ELSE 1 END AS status"
	for name, q := range map[string]string{"lock": got.LockOrders, "read": got.ReadOrders, "by number": got.OrderByNo} {
		require.Contains(t, q, status, name)
	}
	require.Contains(t, got.OrdersForClose, "CASE o.`state` WHEN 0 THEN IF(o.`is_deleted` = 0, 0, 2) WHEN 9 THEN 2 ELSE 1 END AS status")
	require.Contains(t, got.Overdue, "  WHERE o.`state` = 0 AND o.`created` <= :now AND o.`is_deleted` = 0\n")

	s.Orders.SoftDelete = schema.SoftDelete{Column: "deleted_at"}
	got = renderOK(t, s)
	require.Contains(t, got.ScanPage, " AND o.`deleted_at` IS NULL\nORDER BY")
	require.True(t, strings.HasSuffix(got.CloseOrders, " AND `deleted_at` IS NULL"), got.CloseOrders)
	require.Contains(t, got.LockOrders, "WHEN 0 THEN IF(`deleted_at` IS NULL, 0, 2)")

	live, err := schema.ParseValue("'0'")
	require.NoError(t, err)
	s.Orders.SoftDelete = schema.SoftDelete{Column: "del_flag", Live: live}
	require.True(t, strings.HasSuffix(renderOK(t, s).CloseOrders, " AND `del_flag` = '0'"))

	s.Orders.SoftDelete = schema.SoftDelete{Live: schema.Int(0)}
	_, err = Render(s)
	require.ErrorContains(t, err, `softDelete.liveValue: "0" given without softDelete.column`)
}

// TestCouponCopiesGoBackByTheirID: a matched coupon whose used rows are
// copies (schema.Coupon.AnyCopy) locks every used copy matching the page's
// orders with the copy's id, in order id order, and gives back the
// copies chosen by their ids, each still used; without AnyCopy the matched
// statements stay as they were, and AnyCopy needs match and an id.
func TestCouponCopiesGoBackByTheirID(t *testing.T) {
	t.Parallel()
	s := shopSchema(schema.Orders{ScanIndex: "idx_status_created", CreateTime: "created", TimeoutMinutes: 15, User: "member"})
	s.Coupon = &schema.Coupon{Table: "history", Status: "use", Used: schema.Int(1), Unused: schema.Int(0), ID: "hid",
		Match: []schema.Pair{{Column: "member", OrderColumn: "member"}, {Column: "coupon", OrderColumn: "coupon"}}, Index: "idx_mc"}
	join := "`order` o FORCE INDEX (PRIMARY) JOIN `history` h FORCE INDEX (`idx_mc`) ON h.`member` = o.`member` AND h.`coupon` = o.`coupon`"
	off := renderOK(t, s).Coupon
	require.Equal(t, "\nSELECT o.`id` AS id FROM "+join+"\nWHERE o.`id` IN (%s) AND h.`use` = 1 ORDER BY o.`id` FOR UPDATE", off.Lock)
	require.Equal(t, "\nUPDATE "+join+" SET h.`use` = 0\nWHERE o.`id` IN (%s) AND h.`use` = 1", off.Restore)
	require.False(t, off.AnyCopy)

	s.Coupon.AnyCopy = true
	on := renderOK(t, s).Coupon
	require.True(t, on.AnyCopy)
	require.Equal(t, "\nSELECT o.`id` AS id, h.`hid` AS copy_id FROM "+join+"\n"+
		"WHERE o.`id` IN (%s) AND h.`use` = 1 ORDER BY o.`id` FOR UPDATE", on.Lock)
	require.Equal(t, "\nUPDATE `history` SET `use` = 0\nWHERE `hid` IN (%s) AND `use` = 1", on.Restore)

	s.Coupon.ID = ""
	_, err := Render(s)
	require.ErrorContains(t, err, "coupon.id: required")
	s.Coupon.ID, s.Coupon.Match, s.Coupon.OrderColumn = "hid", nil, "coupon"
	_, err = Render(s)
	require.ErrorContains(t, err, "coupon.anyCopy: only with coupon.match")
}
