package orders

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/schema"
)

// foreignPlanTables are the foreign shop's tables whose statistics lie,
// with the executor's own the close writes.
var foreignPlanTables = []string{"t_order", "t_order_item", "t_sku_stock", "t_goods", "t_coupon_history", "t_user_coupon", "t_member",
	"order_dead_letter", "order_close_log"}

// foreignPlanFixture is the foreign shop after a while (ordertest.ForeignShop)
// and one page of its due orders.
type foreignPlanFixture struct {
	db        *dbtest.DB
	now       time.Time
	cursor    scanCursor
	ids       []int64 // the page's order ids, ascending
	nos       []string
	deltas    []skuDelta // the page's lines summed per SKU
	couponIDs []int64    // the page's orders with a coupon
	points    []skuDelta // the page's points summed per member
}

func newForeignPlanFixture(t *testing.T) *foreignPlanFixture {
	t.Helper()
	ctx := context.Background()
	f := &foreignPlanFixture{db: dbtest.New(t)}
	ordertest.ForeignTables(t, f.db.DB)
	ordertest.ForeignShop(t, f.db.DB, 20000, 1500)
	f.now = f.db.Now(t)
	var rows []scanRow
	require.NoError(t, sqlx.SelectContext(ctx, f.db, &rows, `SELECT id, order_sn AS order_no, created_at AS create_time FROM t_order
		WHERE order_status = 0 AND created_at <= ? - INTERVAL 15 MINUTE ORDER BY created_at, id LIMIT 501 OFFSET 3000`, f.now))
	require.Len(t, rows, 501)
	f.cursor = scanCursor{CreateTime: rows[0].CreateTime, ID: rows[0].ID}
	for _, r := range rows[1:] {
		f.ids = append(f.ids, r.ID)
		f.nos = append(f.nos, r.OrderNo)
	}
	sum := func(q string) []skuDelta {
		var ds []struct {
			K int64 `db:"k"`
			Q int64 `db:"q"`
		}
		require.NoError(t, sqlx.SelectContext(ctx, f.db, &ds, fmt.Sprintf(q, sqlexec.IntList(f.ids))))
		out := make([]skuDelta, len(ds))
		for i, d := range ds {
			out[i] = skuDelta{SKUID: d.K, Qty: d.Q}
		}
		return out
	}
	f.deltas = sum(`SELECT goods_sku AS k, SUM(num) AS q FROM t_order_item WHERE order_id IN (%s) GROUP BY goods_sku ORDER BY goods_sku`)
	f.points = sum(`SELECT member_id AS k, SUM(use_points) AS q FROM t_order WHERE id IN (%s) AND use_points > 0 GROUP BY member_id ORDER BY member_id`)
	require.NoError(t, sqlx.SelectContext(ctx, f.db, &f.couponIDs,
		fmt.Sprintf(`SELECT id FROM t_order WHERE id IN (%s) AND coupon_id IS NOT NULL ORDER BY id`, sqlexec.IntList(f.ids))))
	require.NotEmpty(t, f.couponIDs)
	return f
}

// TestForeignSchemaStatementPlans is TestHotStatementPlans for a declared
// foreign schema: every statement rendered for the shop's own tables keeps
// its plan and its read budget with true and with lying statistics.
func TestForeignSchemaStatementPlans(t *testing.T) {
	t.Parallel()
	f := newForeignPlanFixture(t)
	locked, err := closesql.Render(ordertest.ForeignSchema(ordertest.LockedOnly))
	require.NoError(t, err)
	byID := ordertest.ForeignSchema(ordertest.TakenAtPlacement)
	byID.Coupon = ordertest.ForeignCouponByID()
	goods, err := closesql.Render(byID)
	require.NoError(t, err)
	anyCopy := ordertest.ForeignSchema(ordertest.LockedOnly)
	anyCopy.Coupon.AnyCopy, anyCopy.Coupon.ID = true, "id"
	copies, err := closesql.Render(anyCopy)
	require.NoError(t, err)
	var copyIDs []int64
	require.NoError(t, sqlx.SelectContext(context.Background(), f.db, &copyIDs, fmt.Sprintf(`SELECT h.id FROM t_order o
		JOIN t_coupon_history h ON h.member_id = o.member_id AND h.coupon_id = o.coupon_id
		WHERE o.id IN (%s) AND h.use_status = 1 ORDER BY h.id`, sqlexec.IntList(f.couponIDs))))
	require.NotEmpty(t, copyIDs)
	n := len(f.ids)
	in := func(q string, args ...any) plantest.Query { return plantest.In(t, q, args...) }
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	deltas := func(q, key string, ds []skuDelta) plantest.Query {
		return plantest.Q(fmt.Sprintf(q, deltaCaseOn(key, ds), deltaSKUs(ds)))
	}
	uses := plantest.Uses
	matched := uses("o", "PRIMARY", "range").And("h", "idx_member_coupon", "ref")
	skus := make([]int64, len(f.deltas))
	for i, d := range f.deltas {
		skus[i] = d.SKUID
	}
	s := locked
	plantest.Check(t, f.db.DB, foreignPlanTables, []plantest.Statement{
		{Name: "scan page", Query: named(s.ScanPage, scanParams{AfterTime: f.cursor.CreateTime, AfterID: f.cursor.ID, Now: f.now, ShardTotal: 1, Limit: n}), Units: n, Plan: uses("o", "idx_status_created", "range")},
		{Name: "scan page, shard 2 of 4", Query: named(s.ScanPage, scanParams{AfterTime: f.cursor.CreateTime, AfterID: f.cursor.ID, Now: f.now, ShardTotal: 4, ShardIndex: 2, Limit: n}), Units: n, Plan: uses("o", "idx_status_created", "range")},
		{Name: "lock order rows", Query: plantest.Lit(s.LockOrders, f.ids), Units: n, Plan: plantest.PK("t_order")},
		{Name: "payment-step read", Query: plantest.Lit(s.ReadOrders, f.ids), Units: n, Plan: plantest.PK("t_order")},
		// Two lines an order here: an entry and a row each, and the probe.
		{Name: "order items by id", Query: in(s.OrderItems, f.ids), Units: n, PerUnit: 5, Plan: uses("t_order_item", "idx_order_id", "range")},
		{Name: "lock stock (locked)", Query: plantest.Lit(s.Stock.Lock, skus), Units: n, Plan: uses("t_sku_stock", "uk_sku", "range")},
		{Name: "release stock (locked)", Query: deltas(s.Stock.Release, s.Stock.Key, f.deltas), Units: n, Plan: uses("t_sku_stock", "uk_sku", "range")},
		{Name: "lock stock (goods)", Query: plantest.Lit(goods.Stock.Lock, skus), Units: n, Plan: plantest.PK("t_goods")},
		{Name: "add back stock (goods)", Query: deltas(goods.Stock.Release, goods.Stock.Key, f.deltas), Units: n, Plan: plantest.PK("t_goods")},
		{Name: "status CAS", Query: named(fmt.Sprintf(s.CloseOrders, sqlexec.IntList(f.ids)), map[string]any{"close_time": f.now, "close_reason": DefaultReason, "now": f.now}), Units: n, Plan: plantest.PK("t_order")},
		{Name: "lock matched coupons", Query: plantest.Lit(s.Coupon.Lock, f.couponIDs), Units: len(f.couponIDs), Plan: matched},
		// Per order: its row, the coupon's index entry and row, and the write.
		{Name: "restore matched coupons", Query: plantest.Lit(s.Coupon.Restore, f.couponIDs), Units: len(f.couponIDs), PerUnit: 6, Plan: matched},
		{Name: "lock matched coupon copies", Query: plantest.Lit(copies.Coupon.Lock, f.couponIDs), Units: len(f.couponIDs), Plan: matched},
		{Name: "restore coupon copies by id", Query: plantest.Lit(copies.Coupon.Restore, copyIDs), Units: len(copyIDs), Plan: plantest.PK("t_coupon_history")},
		{Name: "lock coupons by id", Query: plantest.Lit(goods.Coupon.Lock, f.couponIDs), Units: len(f.couponIDs), Plan: plantest.PK("t_user_coupon")},
		{Name: "restore coupons by id", Query: plantest.Lit(goods.Coupon.Restore, f.couponIDs), Units: len(f.couponIDs), Plan: plantest.PK("t_user_coupon")},
		{Name: "read givebacks", Query: plantest.Lit(s.Extra.Read, f.ids), Units: n, Plan: plantest.PK("t_order")},
		{Name: "give back points", Query: deltas(s.Extra.Add[0], s.Extra.Key[0], f.points), Units: n, Plan: plantest.PK("t_member")},
		{Name: "CloseOrder: order", Query: plantest.Q(s.OrderByNo, f.nos[0]), Units: 1, Plan: uses("t_order", "uk_order_sn", "const", "ref")},
		{Name: "CloseOrders: batch read", Query: in(s.OrdersForClose, f.nos), Units: n, Plan: uses("o", "uk_order_sn", "range", "ref", "eq_ref").And("d", "uk_order_stage", "eq_ref")},
		{Name: "gauge: overdue", Query: named(s.Overdue, map[string]any{"now": f.now, "cap": 2000}), Units: 2000, Plan: uses("o", "idx_status_created", "range").And("d", "uk_order_stage", "eq_ref").And("<derived2>", "", "ALL")},
	})
}

// TestForeignStockUnhintedScansSmallTable is the control of the declared
// stock index (schema.Stock.Index): on a stock table of 1,500 rows keyed
// by a unique index beside its primary key, a page's 821 keys without the
// hint plan a scan of the whole table, even with true statistics: the
// locking read would lock every stock row checkout needs.
func TestForeignStockUnhintedScansSmallTable(t *testing.T) {
	t.Parallel()
	f := newForeignPlanFixture(t)
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Stock.Index = ""
	s, err := closesql.Render(sch)
	require.NoError(t, err)
	skus := make([]int64, len(f.deltas))
	for i, d := range f.deltas {
		skus[i] = d.SKUID
	}
	lock := plantest.Statement{Name: "unhinted stock lock", Query: plantest.Q(fmt.Sprintf(s.Stock.Lock, sqlexec.IntList(skus))),
		Units: len(f.ids), Plan: plantest.Uses("t_sku_stock", "uk_sku", "range")}
	release := plantest.Statement{Name: "unhinted stock release", Query: plantest.Q(fmt.Sprintf(s.Stock.Release, deltaCaseOn(s.Stock.Key, f.deltas), deltaSKUs(f.deltas))),
		Units: len(f.ids), Plan: plantest.Uses("t_sku_stock", "uk_sku", "range")}
	run := func(st plantest.Statement) string {
		r, err := plantest.Run(context.Background(), f.db.DB, st.Query)
		require.NoError(t, err)
		t.Logf("%s: %d skus of 1500; %d reads; %v", st.Name, len(skus), r.Reads, r.Plan)
		return plantest.Judge(st, r)
	}
	// With true statistics already: the lock scans the table, the release
	// the whole primary key.
	require.Contains(t, run(lock), "type=ALL", "without the hint the lock scans the stock table")
	require.Contains(t, run(release), "type=index", "without the hint the release walks the whole primary key")
}

// TestForeignSoftDeleteKeepsThePlans: a declared soft delete
// (schema.SoftDelete) is a filter on the rows the statements already
// read: the scan and the gauge keep their forced index range, the status
// CAS and the reads by id the primary key, with true and with lying
// statistics.
func TestForeignSoftDeleteKeepsThePlans(t *testing.T) {
	t.Parallel()
	f := newForeignPlanFixture(t)
	_, err := f.db.ExecContext(context.Background(), `ALTER TABLE t_order ADD COLUMN deleted_at DATETIME(3) NULL`)
	require.NoError(t, err)
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Orders.SoftDelete = schema.SoftDelete{Column: "deleted_at"}
	s, err := closesql.Render(sch)
	require.NoError(t, err)
	n := len(f.ids)
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	plantest.Check(t, f.db.DB, foreignPlanTables, []plantest.Statement{
		{Name: "scan page", Query: named(s.ScanPage, scanParams{AfterTime: f.cursor.CreateTime, AfterID: f.cursor.ID, Now: f.now, ShardTotal: 1, Limit: n}), Units: n, Plan: uses("o", "idx_status_created", "range")},
		{Name: "lock order rows", Query: plantest.Lit(s.LockOrders, f.ids), Units: n, Plan: plantest.PK("t_order")},
		{Name: "status CAS", Query: named(fmt.Sprintf(s.CloseOrders, sqlexec.IntList(f.ids)), map[string]any{"close_time": f.now, "close_reason": DefaultReason, "now": f.now}), Units: n, Plan: plantest.PK("t_order")},
		{Name: "CloseOrders: batch read", Query: plantest.In(t, s.OrdersForClose, f.nos), Units: n, Plan: uses("o", "uk_order_sn", "range", "ref", "eq_ref").And("d", "uk_order_stage", "eq_ref")},
		{Name: "gauge: overdue", Query: named(s.Overdue, map[string]any{"now": f.now, "cap": 2000}), Units: 2000, Plan: uses("o", "idx_status_created", "range").And("d", "uk_order_stage", "eq_ref").And("<derived2>", "", "ALL")},
	})
}
