package inspect

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// TestHotStatementPlans runs every statement of the package through
// plantest.Check (see orders' TestHotStatementPlans): with the statistics as
// the load left them and with statistics that lie, each must keep its plan
// and read at most about 3 rows or index entries per order, flag or run
// record it shows.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	plantest.Check(t, f.db.DB, []string{"order_info", "order_item", "inventory", "user_coupon", "order_close_log",
		"order_fulfillment_overdue", "order_close_run"}, []plantest.Statement{
		{Name: "runs: recent", Query: named(recentCloseRunsSQL, map[string]any{"before_id": int64(math.MaxInt64), "limit": 50}), Units: 50, Plan: plantest.PK("order_close_run")},
		{Name: "runs: last hour", Query: named(summarizeCloseRunsSQL, map[string]any{"window_us": time.Hour.Microseconds(), "cap": summaryCap}), Units: max(f.lastHourRuns, 1), Plan: uses("order_close_run", "idx_finished_at", "range").And("<derived2>", "", "ALL")},
		{Name: "order: row", Query: q(orderRecordSQL, f.orderNo), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		{Name: "order: items", Query: q(itemsOfOrderSQL, f.orderNo), Units: 3, Plan: plantest.ByKey("order_item", "idx_order_no")},
		{Name: "order: stock", Query: plantest.Lit(stockRowsSQL, f.skus), Units: 3, Plan: plantest.PK("inventory")},
		{Name: "order: coupon", Query: q(couponRowSQL, f.coupon), Units: 1, Plan: plantest.PK("user_coupon")},
		{Name: "order: close log", Query: q(closeLogRowSQL, f.closedNo), Units: 1, Plan: plantest.ByKey("order_close_log", "uk_order_no")},
		{Name: "order: fulfilment flag", Query: q(flagOfOrderSQL, f.flaggedNo), Units: 1, Plan: plantest.ByKey("order_fulfillment_overdue", "uk_order_no")},
		{Name: "flags: window", Query: named(flagWindowSQL, map[string]any{"since": sqlexec.Earliest, "before_at": sqlexec.Latest, "before_id": int64(math.MaxInt64), "window": oplist.SearchWindow}), Units: min(f.flags, oplist.SearchWindow), Plan: uses("order_fulfillment_overdue", "idx_flagged_at", "range")},
		{Name: "flags: their orders", Query: plantest.Lit(flaggedOrdersSQL, f.flaggedIDs), Units: len(f.flaggedIDs), Plan: plantest.PK("order_info")},
		{Name: "flags: count", Query: named(countFlagsSQL, map[string]any{"since": sqlexec.Earliest, "cap": CountCap}), Units: min(f.flags, CountCap), Plan: uses("order_fulfillment_overdue", "idx_flagged_at", "range", "index").And("<derived2>", "", "ALL")},
	})
}

// planFixture is a shop after a while (ordertest.Shop: unpaid, paid,
// shipped and flagged orders), with the close records of earlier closes
// and a close run every minute for ten days.
type planFixture struct {
	db           *dbtest.DB
	orderNo      string  // an unpaid order
	skus         []int64 // three SKUs
	coupon       int64   // an order's coupon
	closedNo     string  // an order with a close record
	flaggedNo    string  // a flagged order
	flaggedIDs   []int64 // the ids of a window of flagged orders
	flags        int     // fulfilment flags
	lastHourRuns int
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	ordertest.Shop(t, db.DB)
	for _, stmt := range []string{
		`INSERT INTO order_close_log (order_no, closed_at, reason) SELECT order_no, NOW(3), 'payment_timeout' FROM order_info WHERE status = 1 AND id % 5 = 3`,
		`INSERT INTO order_close_run (started_at, finished_at, scanned, closed, result)
			SELECT NOW(3) - INTERVAL seq MINUTE, NOW(3) - INTERVAL seq MINUTE, 5, 5, 'r' FROM seq_1_to_14400`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	get := func(dst any, query string) {
		t.Helper()
		require.NoError(t, db.GetContext(ctx, dst, query), query)
	}
	get(&f.orderNo, `SELECT order_no FROM order_info WHERE status = 0 ORDER BY id LIMIT 1`)
	require.NoError(t, db.SelectContext(ctx, &f.skus, `SELECT sku_id FROM inventory ORDER BY sku_id LIMIT 3`))
	get(&f.coupon, `SELECT MIN(coupon_id) FROM order_info`)
	get(&f.closedNo, `SELECT order_no FROM order_close_log ORDER BY id LIMIT 1`)
	get(&f.flaggedNo, `SELECT order_no FROM order_fulfillment_overdue ORDER BY id LIMIT 1`)
	require.NoError(t, db.SelectContext(ctx, &f.flaggedIDs, `SELECT order_id FROM order_fulfillment_overdue ORDER BY id LIMIT ?`, oplist.SearchWindow))
	get(&f.flags, `SELECT COUNT(*) FROM order_fulfillment_overdue`)
	get(&f.lastHourRuns, `SELECT COUNT(*) FROM order_close_run WHERE finished_at >= NOW(3) - INTERVAL 1 HOUR`)
	return f
}
