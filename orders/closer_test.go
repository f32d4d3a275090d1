package orders_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

func TestRunClosesDueOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 3000, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1, CouponFraction: 0.3})
	require.Positive(t, res.Due)

	var pages, progressClosed int
	st := b.run(t, orders.RunOptions{PageSize: 250, Progress: func(p orders.PageStats) {
		pages++
		progressClosed += p.Closed
		require.Equal(t, pages, p.Page)
	}})
	require.Equal(t, res.Due, st.Scanned)
	require.Equal(t, res.Due, st.Closed)
	require.Zero(t, st.SkippedPaid+st.SkippedLocked+st.DeadLettered+st.SkippedClosed+st.SkippedNotDue)
	require.Equal(t, st.Closed, progressClosed)
	require.Equal(t, st.Pages, pages)
	b.Check(t, base)

	c := b.Counts(t)
	require.Equal(t, res.Due, c.Closed)
	require.Equal(t, res.Paid, c.Paid)
	require.Equal(t, res.NotDue, c.Unpaid, "orders within their timeout are untouched")
	require.Equal(t, res.Due, b.Count(t, `SELECT COUNT(*) FROM order_close_log WHERE reason = 'payment_timeout'`))
	require.Zero(t, b.RedisKeys(t), "every lock released")

	again := b.run(t, orders.RunOptions{})
	require.Zero(t, again.Scanned, "a second run finds nothing")
}

func TestRunStatsString(t *testing.T) {
	t.Parallel()
	st := orders.RunStats{Scanned: 10, Closed: 7, SkippedPaid: 1, SkippedLocked: 1, DeadLettered: 1,
		Elapsed: 1234567 * time.Microsecond, LockErrors: 3, SkippedClosed: 2}
	require.Equal(t, "scanned=10 closed=7 skipped_paid=1 skipped_locked=1 dead_lettered=1 seconds=1.235", st.String())
}

func TestConcurrentRunsSameShard(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("runs=%d", n), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res, base := b.Seed(t, orderdemo.Spec{Orders: 3000, CouponFraction: 0.3})
			stats := make([]orders.RunStats, n)
			var g errgroup.Group
			for i := range n {
				g.Go(func() error {
					var err error
					stats[i], err = b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 100})
					return err
				})
			}
			require.NoError(t, g.Wait())
			closed := 0
			for _, st := range stats {
				closed += st.Closed
				require.Zero(t, st.DeadLettered)
			}
			require.Equal(t, res.Due, closed, "every due order closed exactly once")
			require.Equal(t, res.Due, b.Counts(t).Closed)
			b.Check(t, base)
		})
	}
}

func TestShardsConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 3000, DueFraction: 0.85, PaidFraction: 0.05, NotDueFraction: 0.1, CouponFraction: 0.3})
	const total = 3
	stats := b.runShards(t, total)
	closedPerShard := shard.Counts(b.ids(t, `SELECT id FROM order_info WHERE status = 2`), total)
	sum := 0
	for i, st := range stats {
		require.Equal(t, st.Scanned, st.Closed, "shard %d", i)
		require.Equal(t, closedPerShard[i], st.Closed, "shard %d closed only its own orders", i)
		sum += st.Closed
	}
	require.Equal(t, res.Due, sum)
	c := b.Counts(t)
	require.Equal(t, res.Due, c.Closed, "every due order closed once")
	require.Equal(t, res.NotDue, c.Unpaid, "no not-due order touched")
	b.Check(t, base)
}

// runShards runs the close sweep as total broadcast executors at once,
// pages of 100, and returns each shard's stats.
func (b *testBundle) runShards(t *testing.T, total int) []orders.RunStats {
	t.Helper()
	stats := make([]orders.RunStats, total)
	var g errgroup.Group
	for i := range total {
		g.Go(func() error {
			var err error
			stats[i], err = b.Closer.Run(b.Ctx, orders.RunOptions{ShardIndex: i, ShardTotal: total, PageSize: 100})
			return err
		})
	}
	require.NoError(t, g.Wait())
	return stats
}

// Broadcast executors get even shares whatever the ids look like: odd only
// (a two-node Galera cluster's auto_increment_increment), step 3 (three
// nodes) and snowflake-shaped (timestamp<<22 | worker<<12 | sequence,
// written a few ms apart, so mostly even). With id % total one of two
// executors would get every odd id. Every due order is closed exactly once,
// by the shard shard.Of names, each shard within ±10% of the mean.
func TestShardsBalanceWhateverTheIDs(t *testing.T) {
	t.Parallel()
	// Each rewrites the demo's ids 1..n (descending, so no new id meets an
	// old one) keeping their order.
	shapes := map[string]string{
		"odd only":  `UPDATE order_info SET id = 2 * id - 1 ORDER BY id DESC`,
		"step 3":    `UPDATE order_info SET id = 3 * id ORDER BY id DESC`,
		"snowflake": `UPDATE order_info SET id = (1764000000000 + id * 7 + id % 5) << 22 | (id % 3) << 12 | (id % 17 = 0) ORDER BY id DESC`,
	}
	for name, remap := range shapes {
		for _, total := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s, %d executors", name, total), func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				res, _ := b.Seed(t, orderdemo.Spec{Orders: 1200, DueFraction: 0.9, PaidFraction: 0.05, NotDueFraction: 0.05})
				_, err := b.DB.ExecContext(b.Ctx, remap)
				require.NoError(t, err)
				base := b.Snapshot(t)
				stats := b.runShards(t, total)
				closed := shard.Counts(b.ids(t, `SELECT id FROM order_info WHERE status = 2`), total)
				mean := float64(res.Due) / float64(total)
				sum := 0
				for i, st := range stats {
					require.Equal(t, closed[i], st.Closed, "shard %d closed exactly its own orders", i)
					require.InDelta(t, mean, float64(st.Closed), 0.10*mean, "shard %d closed %d of %d (per shard %v)", i, st.Closed, res.Due, closed)
					sum += st.Closed
				}
				require.Equal(t, res.Due, sum, "every due order closed exactly once")
				require.Equal(t, res.Due, b.Counts(t).Closed)
				b.Check(t, base)
			})
		}
	}
}

func TestPayRacesClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 1200, DueFraction: 1, CouponFraction: 0.5})
	nos := b.ShuffledOrderNos(t)

	var paid, tooLate atomic.Int64
	var g errgroup.Group
	var st orders.RunStats
	g.Go(func() error {
		var err error
		// Paced so the run overlaps the payers for most of its length.
		st, err = b.Closer.Run(b.Ctx, orders.RunOptions{PageSize: 40, MaxPerSecond: 1500})
		return err
	})
	b.payAll(&g, nos, &paid, &tooLate)
	require.NoError(t, g.Wait())
	c := b.Counts(t)
	require.Equal(t, res.Orders, c.Paid+c.Closed, "each order ends paid or closed")
	require.Equal(t, int(paid.Load()), c.Paid)
	require.Equal(t, int(tooLate.Load()), c.Closed)
	require.Equal(t, st.Closed, c.Closed)
	t.Logf("paid %d, closed %d, close run skipped %d locked", c.Paid, c.Closed, st.SkippedLocked)
	b.Check(t, base)
}

func TestRerunAfterCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 2000, DueFraction: 1, CouponFraction: 0.3})
	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	var once sync.Once
	st, err := b.Closer.Run(ctx, orders.RunOptions{PageSize: 100, Progress: func(p orders.PageStats) {
		// Cancel while the next page is being worked on.
		once.Do(func() { time.AfterFunc(time.Millisecond, cancel) })
	}})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, st.Closed, res.Due)
	require.Equal(t, st.Closed, b.Counts(t).Closed, "the stats match what was committed: nothing half-done")
	b.Check(t, base)

	again := b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, res.Due, st.Closed+again.Closed)
	require.Equal(t, res.Due, b.Counts(t).Closed)
	b.Check(t, base)
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 1000, CouponFraction: 0.3})
	before := b.Counts(t)
	sum := func() int {
		return b.Count(t, `SELECT COALESCE(SUM(available * 3 + locked), 0) FROM inventory`) +
			b.Count(t, `SELECT COALESCE(SUM(status * 7 + id), 0) FROM user_coupon`)
	}
	sumBefore := sum()

	st := b.run(t, orders.RunOptions{DryRun: true, PageSize: 100})
	require.True(t, st.DryRun)
	require.Equal(t, res.Due, st.Scanned)
	require.Equal(t, res.Due, st.Closed, "counts what it would close")
	require.Equal(t, before, b.Counts(t))
	require.Equal(t, sumBefore, sum())
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	require.Zero(t, b.RedisKeys(t), "no locks taken")
	b.Check(t, base)
}

func TestMaxOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, base := b.Seed(t, orderdemo.Spec{Orders: 1000, DueFraction: 1})
	st := b.run(t, orders.RunOptions{MaxOrders: 250, PageSize: 100})
	require.Equal(t, 250, st.Scanned)
	require.Equal(t, 250, st.Closed)
	require.Equal(t, 3, st.Pages)
	b.Check(t, base)
}

// A cursor saved under id % total (shard_rule 0, before migration 0120)
// names a position among another set of orders: the capped run ignores it
// and starts at the head, then saves its own (shard_rule 1) over it.
func TestCappedRunIgnoresCursorOfOldShardRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, base := b.Seed(t, orderdemo.Spec{Orders: 400, DueFraction: 1})
	mine := b.ids(t, `SELECT id FROM order_info ORDER BY create_time, id`)
	var head []int64 // shard 0 of 2, in scan order
	for _, id := range mine {
		if shard.Of(id, 2) == 0 {
			head = append(head, id)
		}
	}
	middle := head[len(head)/2]
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_close_cursor (order_table, shard_total, shard_index, create_time, order_id, updated_at)
		SELECT 'order_info', 2, 0, create_time, id, UTC_TIMESTAMP(3) FROM order_info WHERE id = ?`, middle)
	require.NoError(t, err)

	st := b.run(t, orders.RunOptions{ShardIndex: 0, ShardTotal: 2, MaxOrders: 30, PageSize: 10})
	require.Equal(t, 30, st.Closed)
	closed := b.ids(t, `SELECT id FROM order_info WHERE status = 2 ORDER BY create_time, id`)
	require.Equal(t, head[:30], closed, "the run started at the head, not after the old rule's cursor")
	var rule int
	var at int64
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT shard_rule, order_id FROM order_close_cursor WHERE order_table = 'order_info' AND shard_total = 2 AND shard_index = 0`).Scan(&rule, &at))
	require.Equal(t, 1, rule)
	require.Equal(t, head[29], at, "the next run resumes after the last order this one handled")

	st = b.run(t, orders.RunOptions{ShardIndex: 0, ShardTotal: 2, MaxOrders: 30, PageSize: 10})
	require.Equal(t, 30, st.Closed)
	require.Equal(t, head[:60], b.ids(t, `SELECT id FROM order_info WHERE status = 2 ORDER BY create_time, id`), "the new cursor is followed")
	b.Check(t, base)
}

func TestMaxPerSecond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, base := b.Seed(t, orderdemo.Spec{Orders: 2000, DueFraction: 1})
	const rate = 500.0
	st := b.run(t, orders.RunOptions{MaxPerSecond: rate})
	require.Equal(t, 2000, st.Closed)
	got := float64(st.Closed) / st.Elapsed.Seconds()
	t.Logf("closed %d in %v: %.0f/s (cap %.0f/s)", st.Closed, st.Elapsed, got, rate)
	require.LessOrEqual(t, got, rate*1.10, "the cap holds within 10%")
	// Below the cap only when the machine cannot keep up; a wide margin,
	// since other tests share it.
	require.GreaterOrEqual(t, got, rate*0.5)
	b.Check(t, base)
}

func TestRunOptionsValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, opt := range []orders.RunOptions{
		{ShardIndex: 2, ShardTotal: 2},
		{ShardIndex: -1},
		{PageSize: 100_000},
		{MaxOrders: -1},
		{MaxPerSecond: -5},
	} {
		_, err := b.Closer.Run(b.Ctx, opt)
		require.Error(t, err, "%+v", opt)
	}
}

// A lease that cannot stay valid until commit makes every page roll back.
// The commit margin outlasts the TTL, so no lease is ever valid long enough
// to commit, however fast the machine; a TTL shorter than the acquisition
// itself (a 20 ms one on a loaded machine) would leave pages unlocked
// instead, lock errors rather than leases lost.
func TestLeaseExpiredRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithLocker(orderlock.Config{TTL: time.Second}),
		paytest.WithCloser(orders.CloserConfig{CommitMargin: 2 * time.Second}))
	res, base := b.Seed(t, orderdemo.Spec{Orders: 300, DueFraction: 1, CouponFraction: 0.5})
	st := b.run(t, orders.RunOptions{PageSize: 100})
	require.Zero(t, st.Closed)
	require.Equal(t, res.Due, st.SkippedLocked)
	require.Equal(t, res.Due, st.LeaseLost)
	require.Zero(t, b.Counts(t).Closed)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_close_log`))
	b.Check(t, base)
}

func TestCloseReasonAndTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newCloser(t, orders.CloserConfig{Reason: "test_reason"})
	b.Seed(t, orderdemo.Spec{Orders: 50, DueFraction: 1})
	dbNow := b.DB.Now(t)
	_, err := c.Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	var rows []struct {
		CloseTime time.Time `db:"close_time"`
		Reason    string    `db:"close_reason"`
		ClosedAt  time.Time `db:"closed_at"`
		LogReason string    `db:"reason"`
	}
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT o.close_time, o.close_reason, l.closed_at, l.reason
		FROM order_info o JOIN order_close_log l ON l.order_no = o.order_no`))
	require.Len(t, rows, 50)
	for _, r := range rows {
		require.Equal(t, "test_reason", r.Reason)
		require.Equal(t, "test_reason", r.LogReason)
		require.Equal(t, r.CloseTime, r.ClosedAt)
		require.WithinDuration(t, dbNow, r.CloseTime, time.Minute, "close time is on the database clock")
	}
}

var stringForm = regexp.MustCompile(`^scanned=\d+ closed=\d+ skipped_paid=\d+ skipped_locked=\d+ dead_lettered=\d+ seconds=\d+\.\d{3}$`)

func TestRunStatsStringForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Seed(t, orderdemo.Spec{Orders: 10})
	st := b.run(t, orders.RunOptions{})
	require.Regexp(t, stringForm, st.String())
	require.False(t, errors.Is(st.LockErr, context.Canceled))
}
