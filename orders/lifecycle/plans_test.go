package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
)

// TestHotStatementPlans runs every statement of the package through
// plantest.Check (see orders' TestHotStatementPlans): with the statistics as
// the load left them and with statistics that lie, each must keep its plan
// and read at most about 3 rows or index entries per order it handles.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	sql := render(defaultTable)
	first := cursor{At: sqlexec.Earliest, ID: -1}
	plantest.Check(t, f.db.DB, []string{"order_info", "order_fulfillment_overdue"}, []plantest.Statement{
		{Name: "lifecycle: scan shipped", Query: named(sql.scanShipped, scanArgs(first, f.now, 0, 1, 500)), Units: 500, Plan: uses("o", "idx_status_ship_time", "range")},
		{Name: "lifecycle: complete", Query: named(fmt.Sprintf(sql.completeOrders, sqlexec.IntList(f.shipped)), map[string]any{"cutoff": f.now}), Units: len(f.shipped), Plan: plantest.PK("order_info")},
		{Name: "lifecycle: scan overdue", Query: named(sql.scanOverdue, scanArgs(first, f.now, 0, 1, 500)), Units: 500, Plan: uses("o", "idx_status_pay_time", "range").And("f", "uk_order_no", "eq_ref")},
		{Name: "lifecycle: flag overdue", Query: named(fmt.Sprintf(sql.flagOverdue, sqlexec.IntList(f.paid)), map[string]any{"days": 3, "cutoff": f.now, "order_table": defaultTable}), Units: len(f.paid), Plan: plantest.PK("o")},
	})
}

// planFixture is an order table shaped like a shop's after a while (unpaid,
// paid, shipped orders, a flag table with history), as orders' plan test
// builds it.
type planFixture struct {
	db      *dbtest.DB
	now     time.Time
	shipped []int64 // shipped orders
	paid    []int64 // paid orders with pay_time
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	ordertest.Shop(t, db.DB)
	f.now = db.Now(t)
	require.NoError(t, db.SelectContext(ctx, &f.shipped, `SELECT id FROM order_info WHERE status = 3 ORDER BY id LIMIT 500`))
	require.NoError(t, db.SelectContext(ctx, &f.paid, `SELECT id FROM order_info WHERE status = 1 AND pay_time IS NOT NULL ORDER BY id LIMIT 500`))
	return f
}
