package orders_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/orders"
)

func newLifecycle(t *testing.T, b *testBundle, cfg orders.LifecycleConfig) *orders.Lifecycle {
	t.Helper()
	l, err := orders.NewLifecycle(b.db.DB, cfg)
	require.NoError(t, err)
	return l
}

// orderState is what the lifecycle jobs may change, per order.
type orderState struct {
	ID           int64      `db:"id"`
	OrderNo      string     `db:"order_no"`
	Status       int        `db:"status"`
	PayTime      *time.Time `db:"pay_time"`
	ShipTime     *time.Time `db:"ship_time"`
	CompleteTime *time.Time `db:"complete_time"`
	CloseTime    *time.Time `db:"close_time"`
	UpdateTime   time.Time  `db:"update_time"`
}

func (b *testBundle) orderStates(t *testing.T) map[string]orderState {
	t.Helper()
	var rows []orderState
	require.NoError(t, b.db.SelectContext(b.ctx, &rows,
		`SELECT id, order_no, status, pay_time, ship_time, complete_time, close_time, update_time FROM order_info`))
	out := make(map[string]orderState, len(rows))
	for _, r := range rows {
		out[r.OrderNo] = r
	}
	return out
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
	b.seed(t, orderdemo.Spec{Orders: paid * 5 / 4, PaidFraction: 0.8, DueFraction: 0.1, NotDueFraction: 0.1, SKUs: 50, CouponFraction: 0.3})
	for _, q := range []string{
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 20 DAY WHERE status = 1 AND id % 10 <= 5`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 15 DAY WHERE status = 1 AND id % 10 IN (0, 1, 2)`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 12 DAY WHERE status = 1 AND id % 10 = 3`,
		`UPDATE order_info SET status = 3, ship_time = NOW(3) - INTERVAL 1 DAY WHERE status = 1 AND id % 10 = 4`,
		`UPDATE order_info SET status = 3 WHERE status = 1 AND id % 10 = 5`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 8 DAY WHERE status = 1 AND id % 10 IN (6, 7)`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 5 DAY WHERE status = 1 AND id % 10 = 8`,
	} {
		_, err := b.db.ExecContext(b.ctx, q)
		require.NoError(t, err)
	}
	b.run(t, orders.RunOptions{}) // close the few due unpaid orders
}

func (b *testBundle) countWhere(t *testing.T, where string) int {
	t.Helper()
	return b.count(t, `SELECT COUNT(*) FROM order_info WHERE `+where)
}

// Due shipped orders are completed once, by the database clock; orders not
// due, without ship_time or in other states are untouched; a rerun changes
// nothing; the invariants hold (completed orders count as paid).
func TestAutoConfirmCompletesDueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 1000)
	base := snapshot(t, b)
	due := b.countWhere(t, `status = 3 AND id % 10 IN (0, 1, 2)`)
	require.Positive(t, due)
	before := b.orderStates(t)
	l := newLifecycle(t, b, orders.LifecycleConfig{})

	var pages []orders.LifecyclePage
	st, err := l.AutoConfirm(b.ctx, orders.LifecycleOptions{PageSize: 40, Progress: func(p orders.LifecyclePage) { pages = append(pages, p) }})
	require.NoError(t, err)
	require.Equal(t, due, st.Scanned)
	require.Equal(t, due, st.Changed)
	require.Zero(t, st.Skipped)
	require.Equal(t, 14, st.Days)
	require.Equal(t, st.Now.AddDate(0, 0, -14), st.Cutoff)
	require.Len(t, pages, (due+39)/40)
	require.Regexp(t, `^scanned=\d+ completed=\d+ skipped=0 days=14 seconds=`, st.String())

	now := b.dbNow(t)
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
	b.check(t, base)

	st, err = l.AutoConfirm(b.ctx, orders.LifecycleOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "a rerun finds nothing")

	// The job param's days override: 12 takes the orders shipped 12 days ago.
	st, err = l.AutoConfirm(b.ctx, orders.LifecycleOptions{Days: 12})
	require.NoError(t, err)
	require.Equal(t, b.countWhere(t, `id % 10 = 3 AND status = 4`), st.Changed)
	require.Positive(t, st.Changed)
	require.Zero(t, b.countWhere(t, `status = 3 AND ship_time IS NOT NULL AND id % 10 <> 4`))
	require.Equal(t, b.countWhere(t, `id % 10 = 5 AND status = 3 AND ship_time IS NULL`), b.countWhere(t, `id % 10 = 5 AND status = 3`),
		"shipped without ship_time: never auto-confirmed")
	b.check(t, base)
}

// Four runs at once on the same shard, then three shards: each order is
// completed by exactly one of them.
func TestAutoConfirmConcurrentAndSharded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 2000)
	due := b.countWhere(t, `status = 3 AND id % 10 IN (0, 1, 2)`)
	l := newLifecycle(t, b, orders.LifecycleConfig{PageSize: 25})
	other := newLifecycle(t, b, orders.LifecycleConfig{PageSize: 25})

	var mu sync.Mutex
	changed, scanned := 0, 0
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			lc := l
			if i%2 == 1 {
				lc = other
			}
			st, err := lc.AutoConfirm(b.ctx, orders.LifecycleOptions{})
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
	for shard := range 3 {
		st, err := l.AutoConfirm(b.ctx, orders.LifecycleOptions{ShardIndex: shard, ShardTotal: 3, Days: 12})
		require.NoError(t, err)
		require.Equal(t, b.countWhere(t, fmt.Sprintf(`status = 4 AND id %% 10 = 3 AND id %% 3 = %d`, shard)), st.Changed)
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
	l := newLifecycle(t, b, orders.LifecycleConfig{AutoConfirmDays: 14})

	st, err := l.AutoConfirm(b.ctx, orders.LifecycleOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, due, st.Changed)
	require.True(t, st.DryRun)
	require.Equal(t, before, b.orderStates(t), "a dry run changes nothing")

	st, err = l.AutoConfirm(b.ctx, orders.LifecycleOptions{MaxOrders: 7, PageSize: 3})
	require.NoError(t, err)
	require.Equal(t, 7, st.Scanned)
	require.Equal(t, 7, st.Changed)
	require.Equal(t, 3, st.Pages)

	for _, opt := range []orders.LifecycleOptions{
		{Days: -1}, {Days: 3651}, {ShardIndex: 2, ShardTotal: 2}, {PageSize: 5001}, {MaxOrders: -1},
	} {
		_, err := l.AutoConfirm(b.ctx, opt)
		require.Error(t, err, "%+v", opt)
		_, err = l.FlagOverdue(b.ctx, opt)
		require.Error(t, err, "%+v", opt)
	}
	for _, cfg := range []orders.LifecycleConfig{{AutoConfirmDays: -3}, {FulfillmentTimeoutDays: 4000}, {PageSize: 9999}} {
		_, err := orders.NewLifecycle(b.db.DB, cfg)
		require.Error(t, err, "%+v", cfg)
	}
	_, err = orders.NewLifecycle(nil, orders.LifecycleConfig{})
	require.Error(t, err)
}

type overdueRow struct {
	OrderID   int64     `db:"order_id"`
	OrderNo   string    `db:"order_no"`
	PayTime   time.Time `db:"pay_time"`
	Deadline  time.Time `db:"deadline"`
	FlaggedAt time.Time `db:"flagged_at"`
}

func (b *testBundle) overdue(t *testing.T) map[string]overdueRow {
	t.Helper()
	var rows []overdueRow
	require.NoError(t, b.db.SelectContext(b.ctx, &rows, `SELECT order_id, order_no, pay_time, deadline, flagged_at FROM order_fulfillment_overdue`))
	out := map[string]overdueRow{}
	for _, r := range rows {
		out[r.OrderNo] = r
	}
	return out
}

// Paid orders not shipped within the timeout are flagged once, with their
// pay time and deadline; no order changes in any way; orders paid recently,
// without pay_time, shipped or in other states are not flagged; a rerun adds
// nothing; the days override widens the net.
func TestFlagOverdueFlagsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 1000)
	base := snapshot(t, b)
	due := b.countWhere(t, `status = 1 AND id % 10 IN (6, 7)`)
	require.Positive(t, due)
	before := b.orderStates(t)
	l := newLifecycle(t, b, orders.LifecycleConfig{PageSize: 30})

	st, err := l.FlagOverdue(b.ctx, orders.LifecycleOptions{})
	require.NoError(t, err)
	require.Equal(t, due, st.Scanned)
	require.Equal(t, due, st.Changed)
	require.Equal(t, 7, st.Days)
	require.Regexp(t, `^scanned=\d+ flagged=\d+ skipped=0 days=7 seconds=`, st.String())
	require.Equal(t, before, b.orderStates(t), "flagging never changes an order")

	flags := b.overdue(t)
	require.Len(t, flags, due)
	now := b.dbNow(t)
	for no, f := range flags {
		o := before[no]
		require.Equal(t, 1, o.Status)
		require.Contains(t, []int64{6, 7}, o.ID%10)
		require.Equal(t, o.ID, f.OrderID)
		require.Equal(t, *o.PayTime, f.PayTime)
		require.Equal(t, o.PayTime.AddDate(0, 0, 7), f.Deadline)
		require.WithinDuration(t, now, f.FlaggedAt, time.Minute)
	}

	st, err = l.FlagOverdue(b.ctx, orders.LifecycleOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Scanned, "flagged orders are not returned again")
	require.Equal(t, flags, b.overdue(t))

	st, err = l.FlagOverdue(b.ctx, orders.LifecycleOptions{Days: 5})
	require.NoError(t, err)
	require.Equal(t, b.countWhere(t, `status = 1 AND id % 10 = 8`), st.Changed)
	require.Len(t, b.overdue(t), due+st.Changed)
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM order_fulfillment_overdue f JOIN order_info o ON o.id = f.order_id
		WHERE o.status <> 1 OR o.pay_time IS NULL`), "only paid orders with a pay time")
	require.Equal(t, before, b.orderStates(t))
	b.check(t, base)
}

// Concurrent and sharded runs flag each order once.
func TestFlagOverdueConcurrentAndSharded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 2000)
	due := b.countWhere(t, `status = 1 AND id % 10 IN (6, 7)`)
	l := newLifecycle(t, b, orders.LifecycleConfig{PageSize: 20})

	var mu sync.Mutex
	flagged := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			st, err := l.FlagOverdue(b.ctx, orders.LifecycleOptions{})
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
		st, err := l.FlagOverdue(b.ctx, orders.LifecycleOptions{ShardIndex: shard, ShardTotal: 4, Days: 5})
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
	now := b.dbNow(t)

	var overdue []int64
	require.NoError(t, b.db.SelectContext(b.ctx, &overdue, `SELECT id FROM order_info WHERE status = 1 AND id % 10 IN (6, 7) ORDER BY id`))
	require.Greater(t, len(overdue), 4)
	_, err := b.db.ExecContext(b.ctx, `UPDATE order_info SET status = 3, ship_time = NOW(3) WHERE id IN (?, ?)`, overdue[0], overdue[1])
	require.NoError(t, err)
	n, err := orders.FlagOverdueIDs(b.ctx, b.db.DB, overdue, 7, now.AddDate(0, 0, -7))
	require.NoError(t, err)
	require.Equal(t, int64(len(overdue)-2), n, "shipped meanwhile: not flagged")
	n, err = orders.FlagOverdueIDs(b.ctx, b.db.DB, overdue, 7, now.AddDate(0, 0, -7))
	require.NoError(t, err)
	require.Zero(t, n, "flagged once")

	var shipped []int64
	require.NoError(t, b.db.SelectContext(b.ctx, &shipped, `SELECT id FROM order_info WHERE status = 3 AND id % 10 IN (0, 1, 2) ORDER BY id`))
	require.Greater(t, len(shipped), 4)
	_, err = b.db.ExecContext(b.ctx, `UPDATE order_info SET status = 4, complete_time = NOW(3) WHERE id = ?`, shipped[0])
	require.NoError(t, err)
	_, err = b.db.ExecContext(b.ctx, `UPDATE order_info SET ship_time = NOW(3) WHERE id = ?`, shipped[1]) // re-shipped
	require.NoError(t, err)
	n, err = orders.CompleteOrderIDs(b.ctx, b.db.DB, shipped, now.AddDate(0, 0, -14))
	require.NoError(t, err)
	require.Equal(t, int64(len(shipped)-2), n)
	require.Equal(t, 1, b.countWhere(t, fmt.Sprintf(`id = %d AND status = 3`, shipped[1])), "re-shipped: not due any more")
}

// Ship and Confirm: CAS steps, idempotent, with clear errors; Pay stamps
// pay_time.
func TestShipAndConfirm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.svc.AddStock(b.ctx, 1, 100))
	b.place(t, "L-1", true, orders.Item{SKUID: 1, Quantity: 2})
	b.place(t, "L-2", false, orders.Item{SKUID: 1, Quantity: 1})
	base := snapshot(t, b)

	_, err := b.svc.Ship(b.ctx, "L-1")
	require.ErrorIs(t, err, orders.ErrOrderState, "unpaid")
	require.ErrorContains(t, err, "status 0")
	_, err = b.svc.Ship(b.ctx, "NOPE")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)

	out, err := b.svc.Pay(b.ctx, "L-1")
	require.NoError(t, err)
	require.Equal(t, orders.PayPaid, out)
	o := b.orderStates(t)["L-1"]
	require.NotNil(t, o.PayTime, "Pay stamps pay_time")
	require.WithinDuration(t, b.dbNow(t), *o.PayTime, time.Minute)
	require.Nil(t, b.orderStates(t)["L-2"].PayTime)

	_, err = b.svc.Confirm(b.ctx, "L-1")
	require.ErrorIs(t, err, orders.ErrOrderState, "not shipped yet")
	ok, err := b.svc.Ship(b.ctx, "L-1")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.svc.Ship(b.ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok, "shipping twice is a no-op")
	ok, err = b.svc.Confirm(b.ctx, "L-1")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.svc.Confirm(b.ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = b.svc.Ship(b.ctx, "L-1")
	require.NoError(t, err)
	require.False(t, ok, "a completed order counts as shipped")
	o = b.orderStates(t)["L-1"]
	require.Equal(t, 4, o.Status)
	require.NotNil(t, o.ShipTime)
	require.NotNil(t, o.CompleteTime)
	_, err = b.svc.Confirm(b.ctx, "NOPE")
	require.True(t, errors.Is(err, orders.ErrOrderNotFound))
	b.check(t, base)
}

// The scans walk their index ranges in key order: no full scan, no sort.
func TestLifecycleScansUseIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lifecycleWorld(t, b, 3000)
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO order_dead_letter (order_no, stage, status, next_retry_at)
		SELECT order_no, 'close', IF(id % 3 = 0, 'waiting', 'resolved'), NOW(3) FROM order_info WHERE id % 2 = 0`)
	require.NoError(t, err)
	// A flag table with history (MariaDB plans NOT EXISTS as a scan of it).
	_, err = b.db.ExecContext(b.ctx, `INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
		SELECT id, CONCAT('OLD-', order_no), user_id, NOW(), NOW(), NOW() FROM order_info`)
	require.NoError(t, err)
	for _, table := range []string{"order_info", "order_dead_letter", "order_fulfillment_overdue"} {
		_, err = b.db.ExecContext(b.ctx, `ANALYZE TABLE `+table)
		require.NoError(t, err)
	}
	now := b.dbNow(t)
	first := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query, key string
	}{
		{orders.ScanShippedSQL, "idx_status_ship_time"},
		{orders.ScanOverdueSQL, "idx_status_pay_time"},
	} {
		plan := explainNamed(t, b, tc.query, map[string]any{"cutoff": now.AddDate(0, 0, -7), "after_at": first, "after_id": -1,
			"shard_total": 2, "shard_index": 1, "limit": 500})
		require.Equal(t, tc.key, plan[0]["key"])
		require.Equal(t, "range", plan[0]["type"])
		require.NotContains(t, plan[0]["Extra"], "filesort")
		for _, p := range plan[1:] {
			require.Equal(t, "eq_ref", p["type"], "one probe of the flag table per candidate, not a scan of it")
			require.Equal(t, "uk_order_no", p["key"])
		}
	}
	plan := explainNamed(t, b, orders.DueLettersSQL, map[string]any{"now": now, "after_at": first, "after_id": -1,
		"shard_total": 2, "shard_index": 1, "limit": 100})
	require.Len(t, plan, 1)
	require.Equal(t, "idx_status_retry", plan[0]["key"])
	require.Equal(t, "range", plan[0]["type"])
	require.NotContains(t, plan[0]["Extra"], "filesort")
}
