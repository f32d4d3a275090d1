package delay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Of the dispatchers sharing a Redis timer, one refills it per interval:
// the lease is taken once, refused while it holds (also to a timer of
// another shard count, as while executors move from one to another), and
// free again after its time.
func TestReconcileLeaseOnePerInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tm1 := redisTimerOf(t, b.rdb, b.prefix, 1)
	tm2 := redisTimerOf(t, b.rdb, b.prefix, 3)
	const ttl = 300 * time.Millisecond

	ok, err := tm1.reconcileTurn(ctx, ttl)
	require.NoError(t, err)
	require.True(t, ok, "the first to look takes the interval")
	for _, tm := range []Timer{tm1, tm2} {
		ok, err = tm.reconcileTurn(ctx, ttl)
		require.NoError(t, err)
		require.False(t, ok, "taken for this interval, by itself too")
	}
	pttl, err := b.rdb.PTTL(ctx, b.prefix+"timer:reconcile").Result()
	require.NoError(t, err)
	require.Greater(t, pttl, time.Duration(0))
	require.LessOrEqual(t, pttl, ttl)

	require.Eventually(t, func() bool {
		ok, err := tm2.reconcileTurn(ctx, ttl)
		require.NoError(t, err)
		return ok
	}, 2*time.Second, 20*time.Millisecond, "free again once the interval is over")

	other := redisTimerOf(t, b.rdb, b.prefix+"other:", 1)
	ok, err = other.reconcileTurn(ctx, ttl)
	require.NoError(t, err)
	require.True(t, ok, "timers under other prefixes have leases of their own")
}

// A dispatcher that held the refill and stopped is replaced within an
// interval: a task whose timer entry never existed (registered in the
// caller's transaction, never scheduled) still runs, refilled by the other
// dispatcher once the lease lapses.
func TestReconcileLeaseOfAStoppedDispatcherLapses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	cfg := b.fastConfig(map[string]HandlerFunc{"rec": rec.handle})
	cfg.ReconcileInterval = 400 * time.Millisecond
	first := newDispatcher(t, cfg)
	require.NoError(t, first.Start(context.Background()))
	// Its start-up pass took the lease.
	require.Eventually(t, func() bool {
		n, err := b.rdb.Exists(context.Background(), b.prefix+"timer:reconcile").Result()
		require.NoError(t, err)
		return n == 1
	}, waitLong, 10*time.Millisecond)
	require.NoError(t, first.Stop(context.Background()))

	second := newDispatcher(t, cfg)
	start(t, second)
	ctx := context.Background()
	tx, err := b.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	_, created, err := second.Client().RegisterTx(ctx, tx, Registration{BizUUID: "unscheduled", Handler: "rec", Delay: time.Millisecond})
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, tx.Commit())
	registered := time.Now()

	b.waitStatus(t, "unscheduled", StatusDone)
	require.Equal(t, 1, rec.count("unscheduled"))
	require.Less(t, rec.startTimes("unscheduled")[0].Sub(registered), 2*cfg.ReconcileInterval+3*time.Second,
		"refilled within the lapsed lease and one interval")
}
