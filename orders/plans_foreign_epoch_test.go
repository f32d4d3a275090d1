package orders

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/schema"
)

// TestForeignEpochStatementPlans is TestForeignSchemaStatementPlans for
// the statements that read or guard the times when the foreign shop keeps
// them as epoch integers (order.schema.timeUnit): t_order gets created_ms
// (BIGINT milliseconds), created_s (INT UNSIGNED seconds) and expire_ms
// (the deadline, 15 to 45 minutes after creation), each indexed with the
// status. The scan walks its index by a range on the column itself (the
// parameters are converted, never the column), and the gauge, the guard
// and the reads by id or number keep their plans and read budgets, with
// true and with lying statistics.
func TestForeignEpochStatementPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := foreignShopWith(t,
		`ALTER TABLE t_order ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0, ADD COLUMN created_s INT UNSIGNED NOT NULL DEFAULT 0,
			ADD COLUMN expire_ms BIGINT NULL, ADD COLUMN timeout_m INT NOT NULL DEFAULT 15,
			ADD KEY idx_status_created_ms (order_status, created_ms), ADD KEY idx_status_created_s (order_status, created_s),
			ADD KEY idx_status_expire_ms (order_status, expire_ms)`,
		// The test server's session runs in UTC: created_at is a UTC wall clock.
		`UPDATE t_order SET created_ms = TIMESTAMPDIFF(MICROSECOND, '1970-01-01', created_at) DIV 1000,
			created_s = TIMESTAMPDIFF(SECOND, '1970-01-01', created_at), timeout_m = 15 + id % 31`,
		`UPDATE t_order SET expire_ms = created_ms + timeout_m * 60000`)
	now := db.Now(t)
	shops := []struct {
		name string
		col  string // the scan column, for the page's cursor
		set  func(o *schema.Orders)
	}{
		{"epochMillis, one timeout", "created_ms", func(o *schema.Orders) {
			o.TimeUnit, o.CreateTime, o.ScanIndex = schema.EpochMillis, "created_ms", "idx_status_created_ms"
		}},
		{"epochSeconds, timeout column", "created_s", func(o *schema.Orders) {
			o.TimeUnit, o.CreateTime, o.ScanIndex = schema.EpochSeconds, "created_s", "idx_status_created_s"
			o.TimeoutMinutes, o.TimeoutColumn = 0, "timeout_m"
		}},
		{"epochMillis, due time", "expire_ms", func(o *schema.Orders) {
			o.TimeUnit, o.CreateTime, o.TimeoutMinutes = schema.EpochMillis, "", 0
			o.DueTime, o.ScanIndex = "expire_ms", "idx_status_expire_ms"
		}},
	}
	for _, shop := range shops {
		t.Run(shop.name, func(t *testing.T) {
			sch := ordertest.ForeignSchema(ordertest.LockedOnly)
			sch.Orders.CloseTime, sch.Orders.UpdateTime = "expire_ms", "created_ms" // integer stamps; EXPLAIN changes nothing
			shop.set(&sch.Orders)
			s, err := closesql.Render(sch)
			require.NoError(t, err)
			unit := sch.Orders.TimeUnit
			var rows []struct {
				ID      int64  `db:"id"`
				OrderNo string `db:"order_sn"`
				At      int64  `db:"at"`
			}
			require.NoError(t, sqlx.SelectContext(ctx, db, &rows, fmt.Sprintf(`SELECT id, order_sn, %[1]s AS at FROM t_order
				WHERE order_status = 0 AND %[1]s <= ? ORDER BY %[1]s, id LIMIT 501 OFFSET 3000`, shop.col), unit.Of(now)-15*60*unit.PerSecond()))
			require.Len(t, rows, 501)
			var ids []int64
			var nos []string
			for _, r := range rows[1:] {
				ids, nos = append(ids, r.ID), append(nos, r.OrderNo)
			}
			n := len(ids)
			scan := func(total, index int) plantest.Query {
				return plantest.Named(t, s.ScanPage, scanParams{AfterEpoch: rows[0].At, AfterID: rows[0].ID, NowEpoch: unit.Of(now),
					ShardTotal: total, ShardIndex: index, Limit: n})
			}
			epoch := map[string]any{"close_time": now, "close_reason": DefaultReason, "now": now,
				closesql.NowEpoch: unit.Of(now), closesql.CloseEpoch: unit.Of(now), "cap": 2000}
			uses := plantest.Uses
			plantest.Check(t, db.DB, foreignPlanTables, []plantest.Statement{
				{Name: "scan page", Query: scan(1, 0), Units: n, Plan: uses("o", sch.Orders.ScanIndex, "range")},
				{Name: "scan page, shard 2 of 4", Query: scan(4, 2), Units: n, Plan: uses("o", sch.Orders.ScanIndex, "range")},
				{Name: "lock order rows", Query: plantest.Lit(s.LockOrders, ids), Units: n, Plan: plantest.PK("t_order")},
				{Name: "status CAS", Query: plantest.Named(t, fmt.Sprintf(s.CloseOrders, sqlexec.IntList(ids)), epoch), Units: n, Plan: plantest.PK("t_order")},
				{Name: "CloseOrder: order", Query: plantest.Q(s.OrderByNo, nos[0]), Units: 1, Plan: uses("t_order", "uk_order_sn", "const", "ref")},
				{Name: "CloseOrders: batch read", Query: plantest.In(t, s.OrdersForClose, nos), Units: n, Plan: uses("o", "uk_order_sn", "range", "ref", "eq_ref").And("d", "uk_order_stage", "eq_ref")},
				{Name: "gauge: overdue", Query: plantest.Named(t, s.Overdue, epoch), Units: 2000, Plan: uses("o", sch.Orders.ScanIndex, "range").And("d", "uk_order_stage", "eq_ref").And("<derived2>", "", "ALL")},
			})
		})
	}
}
