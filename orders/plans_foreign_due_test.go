package orders

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// foreignShopWith is a database with the foreign shop after a while
// (ordertest.ForeignShop), changed by stmts, then analyzed.
func foreignShopWith(t *testing.T, stmts ...string) *dbtest.DB {
	t.Helper()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	ordertest.ForeignShop(t, db.DB, 20000, 1500)
	for _, stmt := range append(stmts, `ANALYZE TABLE t_order`) {
		_, err := db.ExecContext(context.Background(), stmt)
		require.NoError(t, err, stmt)
	}
	return db
}

// TestForeignDueTimeStatementPlans is TestForeignSchemaStatementPlans for
// the statements that read or guard the deadline when the foreign shop
// keeps it in a column (order.schema.dueTime, t_order.expire_at indexed
// as (order_status, expire_at)): the scan, the gauge and the guard keep
// their plans and read budgets with true and with lying statistics.
func TestForeignDueTimeStatementPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := foreignShopWith(t,
		// Deadlines 15 to 45 minutes after creation: the order by
		// deadline is not the order by creation.
		`ALTER TABLE t_order ADD COLUMN expire_at DATETIME(3) NULL, ADD KEY idx_status_expire (order_status, expire_at)`,
		`UPDATE t_order SET expire_at = created_at + INTERVAL 15 + id % 31 MINUTE`)
	now := db.Now(t)
	var rows []scanRow
	require.NoError(t, sqlx.SelectContext(ctx, db, &rows, `SELECT id, order_sn AS order_no, expire_at AS create_time FROM t_order
		WHERE order_status = 0 AND expire_at <= ? ORDER BY expire_at, id LIMIT 501 OFFSET 3000`, now))
	require.Len(t, rows, 501)
	cursor := scanCursor{CreateTime: rows[0].CreateTime, ID: rows[0].ID}
	var ids []int64
	var nos []string
	for _, r := range rows[1:] {
		ids, nos = append(ids, r.ID), append(nos, r.OrderNo)
	}
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Orders.CreateTime, sch.Orders.TimeoutMinutes = "", 0
	sch.Orders.DueTime, sch.Orders.ScanIndex = "expire_at", "idx_status_expire"
	s, err := closesql.Render(sch)
	require.NoError(t, err)
	n := len(ids)
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	plantest.Check(t, db.DB, foreignPlanTables, []plantest.Statement{
		{Name: "scan page", Query: named(s.ScanPage, scanParams{AfterTime: cursor.CreateTime, AfterID: cursor.ID, Now: now, ShardTotal: 1, Limit: n}), Units: n, Plan: uses("o", "idx_status_expire", "range")},
		{Name: "scan page, shard 2 of 4", Query: named(s.ScanPage, scanParams{AfterTime: cursor.CreateTime, AfterID: cursor.ID, Now: now, ShardTotal: 4, ShardIndex: 2, Limit: n}), Units: n, Plan: uses("o", "idx_status_expire", "range")},
		{Name: "lock order rows", Query: plantest.Lit(s.LockOrders, ids), Units: n, Plan: plantest.PK("t_order")},
		{Name: "status CAS", Query: named(fmt.Sprintf(s.CloseOrders, sqlexec.IntList(ids)), map[string]any{"close_time": now, "close_reason": DefaultReason, "now": now}), Units: n, Plan: plantest.PK("t_order")},
		{Name: "CloseOrder: order", Query: plantest.Q(s.OrderByNo, nos[0]), Units: 1, Plan: uses("t_order", "uk_order_sn", "const", "ref")},
		{Name: "CloseOrders: batch read", Query: plantest.In(t, s.OrdersForClose, nos), Units: n, Plan: uses("o", "uk_order_sn", "range", "ref", "eq_ref").And("d", "uk_order_stage", "eq_ref")},
		{Name: "gauge: overdue", Query: named(s.Overdue, map[string]any{"now": now, "cap": 2000}), Units: 2000, Plan: uses("o", "idx_status_expire", "range").And("d", "uk_order_stage", "eq_ref").And("<derived2>", "", "ALL")},
	})
}
