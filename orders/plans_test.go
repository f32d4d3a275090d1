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
	"github.com/orderjob/executor/internal/statslie"
	"github.com/orderjob/executor/orders/closesql"
)

// planTables are the tables whose statistics the plan test makes lie.
var planTables = []string{"order_info", "order_item", "inventory", "user_coupon", "order_close_log",
	"order_dead_letter", "order_close_cursor", "order_close_run"}

// TestHotStatementPlans runs every statement of the package's hot paths
// through plantest.Check: with the statistics as the bulk load left them and
// with statistics that lie, each must keep its plan and read at most about 3
// rows or index entries per order (or letter) it handles. A statement
// added to or changed on a hot path gets one entry here.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	in := func(q string, args ...any) plantest.Query { return plantest.In(t, q, args...) }
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	n := len(f.page)
	closeLog, closeLogArgs := closeLogsInsert(f.pageNos, f.now, DefaultReason)
	one := f.pageNos[0]
	sq := closesql.Default

	plantest.Check(t, f.db.DB, planTables, []plantest.Statement{
		// The close sweep: scan page, dead letters, items, then the close transaction.
		{Name: "close: scan page", Query: named(sq.ScanPage, scanParams{AfterTime: f.cursor.CreateTime, AfterID: f.cursor.ID, Now: f.now, ShardTotal: 1, Limit: n}), Units: n, Plan: uses("o", "idx_status_create_time", "range")},
		// One shard of four: the shard is tested on the index entry (id is its suffix), so the rows of the other
		// three are neither read nor counted against the budget.
		{Name: "close: scan page, shard 2 of 4", Query: named(sq.ScanPage, scanParams{AfterTime: f.cursor.CreateTime, AfterID: f.cursor.ID, Now: f.now, ShardTotal: 4, ShardIndex: 2, Limit: n}), Units: n, Plan: uses("o", "idx_status_create_time", "range")},
		{Name: "close: open dead letters", Query: q(closesql.OpenLetters, n+1), Units: n, Plan: uses("order_dead_letter", "idx_status_retry", "range")},
		{Name: "close: dead-letter probe", Query: in(closesql.LetterStates, f.pageNos), Units: n, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "close: lock order rows", Query: plantest.Lit(sq.LockOrders, f.pageIDs), Units: n, Plan: plantest.PK("order_info")},
		{Name: "close: order items", Query: in(sq.OrderItems, f.pageNos), Units: n, Plan: uses("order_item", "idx_order_no", "range")},
		{Name: "close: lock stock", Query: plantest.Lit(sq.Stock.Lock, f.skus), Units: n, Plan: plantest.PK("inventory")},
		{Name: "close: lock coupons", Query: plantest.Lit(sq.Coupon.Lock, f.coupons), Units: n, Plan: plantest.PK("user_coupon")},
		{Name: "close: status CAS", Query: named(fmt.Sprintf(sq.CloseOrders, sqlexec.IntList(f.pageIDs)), map[string]any{"close_time": f.now, "close_reason": DefaultReason, "now": f.now}), Units: n, Plan: plantest.PK("order_info")},
		{Name: "close: release stock", Query: q(fmt.Sprintf(sq.Stock.Release, deltaCase(f.deltas), deltaSKUs(f.deltas))), Units: n, Plan: plantest.PK("inventory")},
		{Name: "close: restore coupons", Query: named(fmt.Sprintf(sq.Coupon.Restore, sqlexec.IntList(f.coupons)), map[string]any{"coupon_ids": f.coupons, "order_nos": f.couponNos}), Units: n, Plan: plantest.PK("user_coupon")},
		{Name: "close: close log", Query: q(closeLog, closeLogArgs...), Units: n},
		{Name: "close: resolve dead letters", Query: in(closesql.ResolveDeadLetters, f.pageNos), Units: n, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "close: dead-letter one order", Query: named(closesql.UpsertDeadLetter, deadLetterParams{OrderNo: one, OrderTable: "order_info", LastError: "boom", Now: f.now, FirstStatus: "waiting", FirstDelayUS: 60e6, ParkAfter: 8, BaseUS: 60e6, MaxUS: 3600e6}), Units: 1},
		{Name: "close: payment-step read", Query: plantest.Lit(sq.ReadOrders, f.pageIDs), Units: n, Plan: plantest.PK("order_info")},
		{Name: "close: capped run resumes", Query: named(closesql.CloseCursor, map[string]any{"order_table": "order_info", "shard_total": 4, "shard_index": 1, "shard_rule": cursorShardRule}), Units: 1, Plan: plantest.PK("order_close_cursor")},
		{Name: "close: capped run stops", Query: named(closesql.SetCloseCursor, map[string]any{"order_table": "order_info", "shard_total": 4, "shard_index": 1, "shard_rule": cursorShardRule, "create_time": f.cursor.CreateTime, "order_id": f.cursor.ID}), Units: 1},
		{Name: "close: capped run wrapped", Query: named(closesql.ClearCloseCursor, map[string]any{"order_table": "order_info", "shard_total": 4, "shard_index": 2}), Units: 1, Plan: plantest.PK("order_close_cursor")},
		// CloseOrder and CloseOrders (the delayed-task side).
		{Name: "CloseOrder: order", Query: q(sq.OrderByNo, one), Units: 1, Plan: plantest.ByKey("order_info", "uk_order_no")},
		{Name: "CloseOrder: dead letter", Query: q(closesql.DeadLetterStatus, f.letterNo), Units: 1, Plan: plantest.ByKey("order_dead_letter", "uk_order_stage")},
		{Name: "CloseOrders: batch read", Query: in(sq.OrdersForClose, f.pageNos), Units: n, Plan: plantest.ByKey("o", "uk_order_no").And("d", "uk_order_stage", "eq_ref")},
		// The dead-letter retry job.
		{Name: "retry: due letters", Query: named(closesql.DueLetters, dueLetterParams{Now: f.now, AfterAt: firstCursor.CreateTime, AfterID: firstCursor.ID, ShardTotal: 1, Limit: 500}), Units: f.dueLetters, Plan: uses("order_dead_letter", "idx_table_status_retry", "range")},
		{Name: "retry: claim letter", Query: named(closesql.ClaimLetter, map[string]any{"until": f.now, "ttl_us": 14_000_000, "id": f.letterID, "attempts": 1, "now": f.now}), Units: 1, Plan: plantest.PK("order_dead_letter")},
		{Name: "retry: settle letter", Query: named(closesql.SettleLetter, map[string]any{"status": "resolved", "reason": "r", "id": f.letterID}), Units: 1, Plan: plantest.PK("order_dead_letter")},
		{Name: "retry: note letter", Query: named(closesql.NoteLetter, map[string]any{"reason": "r", "id": f.letterID, "status": "waiting"}), Units: 1, Plan: plantest.PK("order_dead_letter")},
		// The close-run records a run writes and purges (package inspect
		// reads them), and the console's outbox and refund pages.
		{Name: "runs: record", Query: f.named(t, closesql.InsertCloseRun, RunRecord{StartedAt: f.now, Result: "r"}), Units: 1},
		{Name: "runs: expired", Query: named(closesql.ExpiredCloseRuns, map[string]any{"retention_us": (7 * 24 * time.Hour).Microseconds(), "limit": runPurgeBatch}), Units: runPurgeBatch, Plan: uses("order_close_run", "idx_finished_at", "range")},
		{Name: "runs: delete expired", Query: plantest.Lit(closesql.DeleteCloseRuns, f.oldRuns), Units: len(f.oldRuns), Plan: plantest.PK("order_close_run")},
		// Gauges.
		{Name: "gauge: overdue", Query: named(sq.Overdue, map[string]any{"now": f.now, "cap": 2000}), Units: 2000, Plan: uses("o", "idx_status_create_time", "range").And("d", "uk_order_stage", "eq_ref").And("<derived2>", "", "ALL")},
		{Name: "gauge: dead-letter tallies", Query: q(closesql.DeadLetterTallies), Units: f.openLetters, Plan: uses("order_dead_letter", "idx_status_retry", "range")},
	})
}

// TestLyingStatisticsFlipUnhintedLookup is the plan test's control: the
// order-item lookup as it was written before it named its index plans a
// full scan once the statistics lie, and plantest says so. A plan test
// that cannot fail proves nothing.
func TestLyingStatisticsFlipUnhintedLookup(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	const unhinted = `SELECT order_no, sku_id, quantity FROM order_item WHERE order_no IN (?)`
	s := plantest.Statement{Name: "unhinted items", Query: plantest.In(t, unhinted, f.pageNos), Units: len(f.pageNos),
		Plan: plantest.Uses("order_item", "idx_order_no", "range")}
	plantest.Lie(t, f.db.DB, statslie.OneValue, "order_item")
	r, err := plantest.Run(context.Background(), f.db.DB, s.Query)
	require.NoError(t, err)
	t.Logf("%d reads; %v", r.Reads, r.Plan)
	msg := plantest.Judge(s, r)
	require.Contains(t, msg, "type=ALL", "the lie makes the unhinted lookup scan the table")
	require.Contains(t, msg, "budget")
}

// planFixture is a database shaped like a shop's after a while: unpaid due
// and not-yet-due orders, paid, shipped and flagged ones, a dead-letter
// table where resolved letters pile up; and the rows of one page of due orders the statements work on.
type planFixture struct {
	db  *dbtest.DB
	now time.Time

	cursor    scanCursor // the row before the page
	page      []scanRow  // a page of due orders in scan order
	pageIDs   []int64    // ascending
	pageNos   []string
	skus      []int64 // the page's SKUs, ascending
	deltas    []skuDelta
	coupons   []int64 // the page's coupons, ascending
	couponNos []string

	letterID      int64 // a waiting letter
	letterNo      string
	dueLetters    int // waiting letters due now
	openLetters   int // waiting and parked letters
	parkedLetters []int64

	paidNo string // a paid order

	oldRuns         []int64 // close-run records past the retention
	resolvedLetters int
}

// named expands a query with :name parameters from arg.
func (f *planFixture) named(t *testing.T, query string, arg any) plantest.Query {
	t.Helper()
	q, args, err := sqlx.Named(query, arg)
	require.NoError(t, err)
	return plantest.Q(q, args...)
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	ordertest.Shop(t, db.DB)
	for _, stmt := range []string{
		// Dead letters: resolved ones pile up; a few waiting and parked.
		`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at)
			SELECT order_no, 'close', CASE WHEN id % 97 = 1 THEN 'waiting' WHEN id % 97 = 2 THEN 'parked' ELSE 'resolved' END,
			       'close order: boom', 1, NOW(3) - INTERVAL 1 MINUTE
			FROM order_info WHERE id % 2 = 1`,
		// Capped runs of many shardings have left their cursors.
		`INSERT INTO order_close_cursor (order_table, shard_total, shard_index, shard_rule, create_time, order_id, updated_at)
			SELECT IF(seq % 3 = 1, 'order_info', CONCAT('t_order_', seq % 3)), seq DIV 8 + 1, seq % 8, seq % 2, NOW(), seq, UTC_TIMESTAMP(3) FROM seq_0_to_199`,
		// Close records of earlier closes.
		`INSERT INTO order_close_log (order_no, closed_at, reason) SELECT order_no, NOW(3), 'payment_timeout' FROM order_info WHERE status = 1 AND id % 5 = 3`,
		// Close runs every minute for ten days.
		`INSERT INTO order_close_run (started_at, finished_at, scanned, closed, result)
			SELECT NOW(3) - INTERVAL seq MINUTE, NOW(3) - INTERVAL seq MINUTE, 5, 5, 'r' FROM seq_1_to_14400`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	f.now = db.Now(t)

	var rows []scanRow
	require.NoError(t, sqlx.SelectContext(ctx, db, &rows, `SELECT id, order_no, create_time FROM order_info
		WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= ? ORDER BY create_time, id LIMIT 501 OFFSET 3000`, f.now))
	require.Len(t, rows, 501)
	f.cursor = scanCursor{CreateTime: rows[0].CreateTime, ID: rows[0].ID}
	f.page = rows[1:]
	for _, r := range f.page {
		f.pageIDs = append(f.pageIDs, r.ID)
		f.pageNos = append(f.pageNos, r.OrderNo)
	}
	var items []itemRow
	q, args, err := sqlx.In(`SELECT order_no, sku_id, quantity FROM order_item WHERE order_no IN (?)`, f.pageNos)
	require.NoError(t, err)
	require.NoError(t, sqlx.SelectContext(ctx, db, &items, q, args...))
	byNo := map[string]*candidate{}
	var cands []*candidate
	for _, no := range f.pageNos {
		c := &candidate{orderRow: orderRow{scanRow: scanRow{OrderNo: no}}}
		byNo[no] = c
		cands = append(cands, c)
	}
	for _, it := range items {
		byNo[it.OrderNo].items = append(byNo[it.OrderNo].items, it)
	}
	f.deltas = sumDeltas(cands)
	f.skus = sortedKeys(func() map[int64]bool {
		m := map[int64]bool{}
		for _, d := range f.deltas {
			m[d.SKUID] = true
		}
		return m
	}())
	var coupons []struct {
		ID      int64  `db:"coupon_id"`
		OrderNo string `db:"order_no"`
	}
	q, args, err = sqlx.In(`SELECT coupon_id, order_no FROM order_info WHERE order_no IN (?) AND coupon_id IS NOT NULL ORDER BY coupon_id`, f.pageNos)
	require.NoError(t, err)
	require.NoError(t, sqlx.SelectContext(ctx, db, &coupons, q, args...))
	for _, c := range coupons {
		f.coupons = append(f.coupons, c.ID)
		f.couponNos = append(f.couponNos, c.OrderNo)
	}
	require.NotEmpty(t, f.coupons)

	get := func(dst any, query string) {
		t.Helper()
		require.NoError(t, db.GetContext(ctx, dst, query), query)
	}
	sel := func(dst any, query string) {
		t.Helper()
		require.NoError(t, db.SelectContext(ctx, dst, query), query)
	}
	get(&f.letterID, `SELECT MIN(id) FROM order_dead_letter WHERE status = 'waiting'`)
	get(&f.letterNo, `SELECT order_no FROM order_dead_letter WHERE status = 'waiting' ORDER BY id LIMIT 1`)
	get(&f.dueLetters, `SELECT COUNT(*) FROM order_dead_letter WHERE status = 'waiting' AND next_retry_at <= NOW(3)`)
	sel(&f.parkedLetters, `SELECT id FROM order_dead_letter WHERE status = 'parked' ORDER BY id`)
	get(&f.openLetters, `SELECT COUNT(*) FROM order_dead_letter WHERE status IN ('waiting', 'parked')`)
	get(&f.paidNo, `SELECT order_no FROM order_info WHERE status = 1 ORDER BY id LIMIT 1`)
	sel(&f.oldRuns, `SELECT id FROM order_close_run WHERE finished_at < NOW(3) - INTERVAL 7 DAY ORDER BY finished_at LIMIT 100`)
	get(&f.resolvedLetters, `SELECT COUNT(*) FROM order_dead_letter WHERE status = 'resolved'`)
	return f
}
