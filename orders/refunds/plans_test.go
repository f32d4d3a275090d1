package refunds

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// TestStatementPlans runs the package's statements through plantest.Check
// (see orders' TestHotStatementPlans): with the statistics as the load left
// them and with statistics that lie, each must keep its plan and read at
// most about 3 rows or index entries per conflict it handles.
func TestStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	plantest.Check(t, f.db.DB, []string{"order_info", "payment_conflict"}, []plantest.Statement{
		{Name: "refunds: newest page", Query: named(conflictWindowByIDSQL, oplist.WindowParams{BeforeID: math.MaxInt64, Window: 51}), Units: 51, Plan: plantest.PK("payment_conflict")},
		{Name: "refunds: owed page", Query: named(conflictWindowByStatusSQL, oplist.WindowParams{Status: Done, BeforeAt: sqlexec.Latest, BeforeID: math.MaxInt64, Window: 51}), Units: 51, Plan: uses("payment_conflict", "idx_refund_status_created", "range")},
		{Name: "refunds: page rows", Query: plantest.Lit(conflictsByIDSQL, f.conflictIDs), Units: len(f.conflictIDs), Plan: plantest.PK("payment_conflict")},
		{Name: "refunds: of one order", Query: q(conflictsOfOrderSQL, f.conflictOrderNo), Units: 1, Plan: plantest.ByKey("payment_conflict", "idx_order_no")},
		{Name: "gauge: payment conflicts", Query: q(conflictsTotalSQL), Units: max(f.conflicts, 1), Plan: uses("payment_conflict", "idx_refund_status_created", "index")},
		{Name: "gauge: refunds owed", Query: q(refundsOwedSQL), Units: max(f.owed, 1), Plan: uses("payment_conflict", "idx_refund_status_created", "range", "ref")},
		{Name: "operator: refund", Query: q(conflictSQL, f.conflictID), Units: 1, Plan: plantest.ByKey("payment_conflict", "uk_payment_id")},
		{Name: "operator: record refund", Query: named(markRefundedSQL, map[string]any{"note": "r-1", "by": "alice", "payment_id": f.conflictID}), Units: 1, Plan: plantest.ByKey("payment_conflict", "uk_payment_id")},
	})
}

// planFixture is a shop's orders (ordertest.Shop) with the refunds owed
// of a while: most of them long refunded.
type planFixture struct {
	db              *dbtest.DB
	conflicts       int     // payment_conflict rows
	owed            int     // of those, refunds owed
	conflictID      string  // a conflict's payment id
	conflictIDs     []int64 // some payment_conflict ids
	conflictOrderNo string  // an order with a payment conflict
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	ordertest.Shop(t, db.DB)
	_, err := db.ExecContext(ctx, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, refund_status)
		SELECT CONCAT('wx-', id), order_no, 10, NOW(3), IF(id % 500 = 7, 'owed', 'refunded') FROM order_info WHERE id % 50 = 7`)
	require.NoError(t, err)
	require.NoError(t, db.GetContext(ctx, &f.conflicts, `SELECT COUNT(*) FROM payment_conflict`))
	require.NoError(t, db.GetContext(ctx, &f.owed, `SELECT COUNT(*) FROM payment_conflict WHERE refund_status = 'owed'`))
	require.NoError(t, db.GetContext(ctx, &f.conflictID, `SELECT payment_id FROM payment_conflict ORDER BY id LIMIT 1`))
	require.NoError(t, db.SelectContext(ctx, &f.conflictIDs, `SELECT id FROM payment_conflict ORDER BY id LIMIT 50`))
	require.NoError(t, db.GetContext(ctx, &f.conflictOrderNo, `SELECT order_no FROM payment_conflict ORDER BY id LIMIT 1`))
	return f
}
