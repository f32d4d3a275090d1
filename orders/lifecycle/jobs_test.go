package lifecycle_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
)

func newJobs(t *testing.T, b *testBundle, cfg lifecycle.Config) *lifecycle.Jobs {
	t.Helper()
	l, err := lifecycle.New(b.DB.DB, cfg)
	require.NoError(t, err)
	return l
}

// orderStates reads every order's state, by order number.
func (b *testBundle) orderStates(t *testing.T) map[string]ordertest.OrderState {
	t.Helper()
	s, err := ordertest.States(b.Ctx, b.DB)
	require.NoError(t, err)
	return s
}

// lifecycleWorld seeds paid orders and moves them into lifecycle states with
// times relative to the database clock (each UPDATE reads NOW() once, so the
// rows of a group share one time and the keyset's tie-break on id is
// exercised):
//
//	id % 10 = 0,1,2  shipped 15 days ago   (due for auto-confirm at 14)
//	id % 10 = 3      shipped 12 days ago   (due only with days <= 12)
//	id % 10 = 4      shipped 1 day ago
//	id % 10 = 5      shipped, no ship_time (never auto-confirmed)
//	id % 10 = 6,7    paid 8 days ago, not shipped (overdue at 7)
//	id % 10 = 8      paid 5 days ago, not shipped (overdue only with days <= 5)
//	id % 10 = 9      paid, no pay_time (paid before the column existed)
//
// plus unpaid and closed orders from the demo generator.
func lifecycleWorld(t *testing.T, b *testBundle, paid int) {
	t.Helper()
	b.Seed(t, orderdemo.Spec{Orders: paid * 5 / 4, PaidFraction: 0.8, DueFraction: 0.1, NotDueFraction: 0.1, SKUs: 50, CouponFraction: 0.3})
	for _, q := range []string{
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 20 DAY WHERE status = 1 AND id % 10 <= 5`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 15 DAY WHERE status = 1 AND id % 10 IN (0, 1, 2)`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 12 DAY WHERE status = 1 AND id % 10 = 3`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 1 DAY WHERE status = 1 AND id % 10 = 4`,
		`UPDATE order_info SET status = 3 WHERE status = 1 AND id % 10 = 5`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 8 DAY WHERE status = 1 AND id % 10 IN (6, 7)`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 5 DAY WHERE status = 1 AND id % 10 = 8`,
	} {
		_, err := b.DB.ExecContext(b.Ctx, q)
		require.NoError(t, err)
	}
	b.run(t, orders.RunOptions{}) // close the few due unpaid orders
}

func (b *testBundle) countWhere(t *testing.T, where string) int {
	t.Helper()
	return b.DB.Count(t, `SELECT COUNT(*) FROM order_info WHERE `+where)
}

// Due shipped orders are completed once, by the database clock; orders not
// due, without ship_time or in other states are untouched; a rerun changes
// nothing; the invariants hold (completed orders count as paid).
func TestAutoConfirmCompletesDueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 1000)
	base := b.Snapshot(t)
	due := b.countWhere(t, `status = 3 AND id % 10 IN (0, 1, 2)`)
	require.Positive(t, due)
	before := b.orderStates(t)
	l := newJobs(t, b, lifecycle.Config{})

	var pages []lifecycle.Page
	st, err := l.AutoConfirm(b.Ctx, lifecycle.Options{PageSize: 40, Progress: func(p lifecycle.Page) { pages = append(pages, p) }})
	require.NoError(t, err)
	require.Equal(t, due, st.Scanned)
	require.Equal(t, due, st.Changed)
	require.Zero(t, st.Skipped)
	require.Equal(t, 14, st.Days)
	require.Equal(t, st.Now.AddDate(0, 0, -14), st.Cutoff)
	require.Len(t, pages, (due+39)/40)
	require.Regexp(t, `^scanned=\d+ completed=\d+ skipped=0 days=14 seconds=`, st.String())

	now := b.DB.Now(t)
	for no, o := range b.orderStates(t) {
		was := before[no]
		if was.Status == 3 && was.ID%10 <= 2 {
			require.Equal(t, 4, o.Status, no)
			require.NotNil(t, o.CompleteTime)
			require.WithinDuration(t, now, *o.CompleteTime, time.Minute)
			require.Equal(t, was.ShipTime, o.ShipTime)
			continue
		}
		require.Equal(t, was.Status, o.Status, "untouched: %s", no)
		require.Equal(t, was.CompleteTime, o.CompleteTime, no)
		require.Equal(t, was.UpdateTime, o.UpdateTime, no)
	}
	b.Check(t, base)

	st, err = l.AutoConfirm(b.Ctx, lifecycle.Options{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "a rerun finds nothing")

	// The job param's days override: 12 takes the orders shipped 12 days ago.
	st, err = l.AutoConfirm(b.Ctx, lifecycle.Options{Days: 12})
	require.NoError(t, err)
	require.Equal(t, b.countWhere(t, `id % 10 = 3 AND status = 4`), st.Changed)
	require.Positive(t, st.Changed)
	require.Zero(t, b.countWhere(t, `status = 3 AND ship_time IS NOT NULL AND id % 10 <> 4`))
	require.Equal(t, b.countWhere(t, `id % 10 = 5 AND status = 3 AND ship_time IS NULL`), b.countWhere(t, `id % 10 = 5 AND status = 3`),
		"shipped without ship_time: never auto-confirmed")
	b.Check(t, base)
}

// Four runs at once on the same shard, then three shards: each order is
// completed by exactly one of them.
func TestAutoConfirmConcurrentAndSharded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 2000)
	due := b.countWhere(t, `status = 3 AND id % 10 IN (0, 1, 2)`)
	l := newJobs(t, b, lifecycle.Config{PageSize: 25})
	other := newJobs(t, b, lifecycle.Config{PageSize: 25})

	var mu sync.Mutex
	changed, scanned := 0, 0
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			lc := l
			if i%2 == 1 {
				lc = other
			}
			st, err := lc.AutoConfirm(b.Ctx, lifecycle.Options{})
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			changed += st.Changed
			scanned += st.Scanned
			require.Equal(t, st.Scanned, st.Changed+st.Skipped)
		})
	}
	wg.Wait()
	require.Equal(t, due, changed, "each order completed once")
	require.GreaterOrEqual(t, scanned, due)
	require.Equal(t, due, b.countWhere(t, `status = 4`))

	// Sharded, with the 12-day override: disjoint shares that add up.
	want := b.countWhere(t, `status = 3 AND id % 10 = 3`)
	got := 0
	for i := range 3 {
		st, err := l.AutoConfirm(b.Ctx, lifecycle.Options{ShardIndex: i, ShardTotal: 3, Days: 12})
		require.NoError(t, err)
		var completed []int64
		require.NoError(t, b.DB.SelectContext(b.Ctx, &completed, `SELECT id FROM order_info WHERE status = 4 AND id % 10 = 3`))
		require.Equal(t, shard.Counts(completed, 3)[i], st.Changed, "shard %d completed its own orders", i)
		got += st.Changed
	}
	require.Equal(t, want, got)
}

// Dry run, MaxOrders and option errors.
func TestAutoConfirmDryRunAndOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 500)
	due := b.countWhere(t, `status = 3 AND id % 10 IN (0, 1, 2)`)
	before := b.orderStates(t)
	l := newJobs(t, b, lifecycle.Config{AutoConfirmDays: 14})

	st, err := l.AutoConfirm(b.Ctx, lifecycle.Options{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, due, st.Changed)
	require.True(t, st.DryRun)
	require.Equal(t, before, b.orderStates(t), "a dry run changes nothing")

	st, err = l.AutoConfirm(b.Ctx, lifecycle.Options{MaxOrders: 7, PageSize: 3})
	require.NoError(t, err)
	require.Equal(t, 7, st.Scanned)
	require.Equal(t, 7, st.Changed)
	require.Equal(t, 3, st.Pages)

	for _, opt := range []lifecycle.Options{
		{Days: -1}, {Days: 3651}, {ShardIndex: 2, ShardTotal: 2}, {PageSize: 5001}, {MaxOrders: -1},
	} {
		_, err := l.AutoConfirm(b.Ctx, opt)
		require.Error(t, err, "%+v", opt)
		_, err = l.FlagOverdue(b.Ctx, opt)
		require.Error(t, err, "%+v", opt)
	}
	for _, cfg := range []lifecycle.Config{{AutoConfirmDays: -3}, {FulfillmentTimeoutDays: 4000}, {PageSize: 9999}} {
		_, err := lifecycle.New(b.DB.DB, cfg)
		require.Error(t, err, "%+v", cfg)
	}
	_, err = lifecycle.New(nil, lifecycle.Config{})
	require.Error(t, err)
}

type overdueRow struct {
	OrderID   int64     `db:"order_id"`
	OrderNo   string    `db:"order_no"`
	PayTime   time.Time `db:"pay_time"`
	Deadline  time.Time `db:"deadline"`
	FlaggedAt time.Time `db:"flagged_at"`
	Table     string    `db:"order_table"`
}

func (b *testBundle) overdue(t *testing.T) map[string]overdueRow {
	t.Helper()
	var rows []overdueRow
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT order_id, order_no, pay_time, deadline, flagged_at, order_table FROM order_fulfillment_overdue`))
	out := map[string]overdueRow{}
	for _, r := range rows {
		out[r.OrderNo] = r
	}
	return out
}

// Paid orders not shipped within the timeout are flagged once, with their
// pay time, deadline and order table; no order changes in any way; orders paid recently,
// without pay_time, shipped or in other states are not flagged; a rerun adds
// nothing; the days override widens the net.
func TestFlagOverdueFlagsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 1000)
	base := b.Snapshot(t)
	due := b.countWhere(t, `status = 1 AND id % 10 IN (6, 7)`)
	require.Positive(t, due)
	before := b.orderStates(t)
	l := newJobs(t, b, lifecycle.Config{PageSize: 30})

	st, err := l.FlagOverdue(b.Ctx, lifecycle.Options{})
	require.NoError(t, err)
	require.Equal(t, due, st.Scanned)
	require.Equal(t, due, st.Changed)
	require.Equal(t, 7, st.Days)
	require.Regexp(t, `^scanned=\d+ flagged=\d+ skipped=0 days=7 seconds=`, st.String())
	require.Equal(t, before, b.orderStates(t), "flagging never changes an order")

	flags := b.overdue(t)
	require.Len(t, flags, due)
	now := b.DB.Now(t)
	for no, f := range flags {
		o := before[no]
		require.Equal(t, 1, o.Status)
		require.Contains(t, []int64{6, 7}, o.ID%10)
		require.Equal(t, o.ID, f.OrderID)
		require.Equal(t, *o.PayTime, f.PayTime)
		require.Equal(t, o.PayTime.AddDate(0, 0, 7), f.Deadline)
		require.WithinDuration(t, now, f.FlaggedAt, time.Minute)
		require.Equal(t, "order_info", f.Table, "the order table the flag's order_id is an id of")
	}

	st, err = l.FlagOverdue(b.Ctx, lifecycle.Options{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "flagged orders are not returned again")
	require.Equal(t, flags, b.overdue(t))

	st, err = l.FlagOverdue(b.Ctx, lifecycle.Options{Days: 5})
	require.NoError(t, err)
	require.Equal(t, b.countWhere(t, `status = 1 AND id % 10 = 8`), st.Changed)
	require.Len(t, b.overdue(t), due+st.Changed)
	require.Zero(t, b.DB.Count(t, `SELECT COUNT(*) FROM order_fulfillment_overdue f JOIN order_info o ON o.id = f.order_id
		WHERE o.status <> 1 OR o.pay_time IS NULL`), "only paid orders with a pay time")
	require.Equal(t, before, b.orderStates(t))
	b.Check(t, base)
}

// Concurrent and sharded runs flag each order once.
func TestFlagOverdueConcurrentAndSharded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 2000)
	due := b.countWhere(t, `status = 1 AND id % 10 IN (6, 7)`)
	l := newJobs(t, b, lifecycle.Config{PageSize: 20})

	var mu sync.Mutex
	flagged := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			st, err := l.FlagOverdue(b.Ctx, lifecycle.Options{})
			require.NoError(t, err)
			mu.Lock()
			flagged += st.Changed
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, due, flagged)
	require.Len(t, b.overdue(t), due)

	got := 0
	for shard := range 4 {
		st, err := l.FlagOverdue(b.Ctx, lifecycle.Options{ShardIndex: shard, ShardTotal: 4, Days: 5})
		require.NoError(t, err)
		got += st.Changed
	}
	require.Equal(t, b.countWhere(t, `status = 1 AND id % 10 = 8`), got)
}

// Orders that changed between a page's scan and its statement are left
// alone: the flag's INSERT ... SELECT and the completion's UPDATE repeat the
// scan's condition. Simulated by running the page statements on ids the
// scan returned, after changing some of those orders.
func TestLifecyclePageStatementsRecheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 300)
	now := b.DB.Now(t)

	var overdue []int64
	require.NoError(t, b.DB.SelectContext(b.Ctx, &overdue, `SELECT id FROM order_info WHERE status = 1 AND id % 10 IN (6, 7) ORDER BY id`))
	require.Greater(t, len(overdue), 4)
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET status = 3, ship_time = NOW(3) WHERE id IN (?, ?)`, overdue[0], overdue[1])
	require.NoError(t, err)
	n, err := lifecycle.FlagOverdueIDs(b.Ctx, b.DB.DB, overdue, 7, now.AddDate(0, 0, -7))
	require.NoError(t, err)
	require.Equal(t, int64(len(overdue)-2), n, "shipped meanwhile: not flagged")
	n, err = lifecycle.FlagOverdueIDs(b.Ctx, b.DB.DB, overdue, 7, now.AddDate(0, 0, -7))
	require.NoError(t, err)
	require.Zero(t, n, "flagged once")

	var shipped []int64
	require.NoError(t, b.DB.SelectContext(b.Ctx, &shipped, `SELECT id FROM order_info WHERE status = 3 AND id % 10 IN (0, 1, 2) ORDER BY id`))
	require.Greater(t, len(shipped), 4)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_info SET status = 4, complete_time = NOW(3) WHERE id = ?`, shipped[0])
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_info SET ship_time = NOW(3) WHERE id = ?`, shipped[1]) // re-shipped
	require.NoError(t, err)
	n, err = lifecycle.CompleteOrderIDs(b.Ctx, b.DB.DB, shipped, now.AddDate(0, 0, -14))
	require.NoError(t, err)
	require.Equal(t, int64(len(shipped)-2), n)
	require.Equal(t, 1, b.countWhere(t, fmt.Sprintf(`id = %d AND status = 3`, shipped[1])), "re-shipped: not due any more")
}

// The scans walk their index ranges in key order: no full scan, no sort.
func TestLifecycleScansUseIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 3000)
	// A flag table with history (MariaDB plans NOT EXISTS as a scan of it).
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
		SELECT id, CONCAT('OLD-', order_no), user_id, NOW(), NOW(), NOW() FROM order_info`)
	require.NoError(t, err)
	for _, table := range []string{"order_info", "order_fulfillment_overdue"} {
		_, err = b.DB.ExecContext(b.Ctx, `ANALYZE TABLE `+table)
		require.NoError(t, err)
	}
	now := b.DB.Now(t)
	first := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query, key string
	}{
		{lifecycle.ScanShippedSQL, "idx_status_ship_time"},
		{lifecycle.ScanOverdueSQL, "idx_status_pay_time"},
	} {
		r, err := plantest.Run(b.Ctx, b.DB.DB, plantest.Named(t, tc.query, map[string]any{"cutoff": now.AddDate(0, 0, -7), "after_at": first, "after_id": -1,
			"shard_total": 2, "shard_index": 1, "limit": 500}))
		require.NoError(t, err)
		plan := r.Plan
		t.Log(plan)
		require.Equal(t, tc.key, plan[0].Key)
		require.Equal(t, "range", plan[0].Type)
		require.NotContains(t, plan[0].Extra, "filesort")
		for _, p := range plan[1:] {
			require.Equal(t, "eq_ref", p.Type, "one probe of the flag table per candidate, not a scan of it")
			require.Equal(t, "uk_order_no", p.Key)
		}
	}
}
