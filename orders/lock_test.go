package orders_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// A redsync mutex and a Locker lease on the same key exclude each other.
func TestLockerRedsyncInterop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, base := b.Seed(t, orderdemo.Spec{Orders: 100, DueFraction: 1})
	var held string
	require.NoError(t, b.DB.GetContext(b.Ctx, &held, `SELECT order_no FROM order_info ORDER BY id LIMIT 1 OFFSET 10`))

	// A redsync mutex (as a payment holds) makes the close skip the order.
	m := b.Locker.Redsync().NewMutex(b.Locker.KeyFor(held), redsync.WithTries(1))
	require.NoError(t, m.LockContext(b.Ctx))
	st := b.run(t, orders.RunOptions{})
	require.Equal(t, res.Due-1, st.Closed)
	require.Equal(t, 1, st.SkippedLocked)
	require.Zero(t, st.LockErrors, "held elsewhere is not a Redis error")
	ok, err := m.UnlockContext(b.Ctx)
	require.NoError(t, err)
	require.True(t, ok)
	st = b.run(t, orders.RunOptions{})
	require.Equal(t, 1, st.Closed)
	b.Check(t, base)

	// A close lease makes redsync's TryLock fail with ErrTaken, until released.
	lease, err := b.Locker.Acquire(b.Ctx, []string{"X-1"})
	require.NoError(t, err)
	require.True(t, lease.Held("X-1"))
	m = b.Locker.Redsync().NewMutex(b.Locker.KeyFor("X-1"))
	var taken *redsync.ErrTaken
	require.ErrorAs(t, m.TryLockContext(b.Ctx), &taken)
	require.NoError(t, lease.Release(b.Ctx))
	require.NoError(t, m.TryLockContext(b.Ctx))
	_, err = m.UnlockContext(b.Ctx)
	require.NoError(t, err)
}

// Redlock over three independent nodes: one down still gives a quorum; two
// down leaves every order skipped (not closed unlocked, not dead-lettered).
func TestRedlockQuorum(t *testing.T) {
	t.Parallel()
	servers, nodes := redistest.StartNodes(t, 3)
	b := setup(t, paytest.WithLocker(orderlock.Config{Nodes: nodes, Timeout: 300 * time.Millisecond}))
	res, base := b.Seed(t, orderdemo.Spec{Orders: 300, DueFraction: 1, CouponFraction: 0.3})

	// All three up: keys are set on every node while held, released after.
	lease, err := b.Locker.Acquire(b.Ctx, []string{"Q1"})
	require.NoError(t, err)
	for _, n := range nodes {
		require.Equal(t, int64(1), n.Exists(b.Ctx, b.Locker.KeyFor("Q1")).Val())
	}
	require.NoError(t, lease.Release(b.Ctx))
	for _, n := range nodes {
		require.Zero(t, n.Exists(b.Ctx, b.Locker.KeyFor("Q1")).Val())
	}

	// A key held on two nodes by someone else is taken, not failed.
	for _, n := range nodes[:2] {
		require.NoError(t, n.Set(b.Ctx, b.Locker.KeyFor("Q2"), "other", time.Minute).Err())
	}
	lease, err = b.Locker.Acquire(b.Ctx, []string{"Q2"})
	require.NoError(t, err)
	require.False(t, lease.Held("Q2"))
	require.False(t, lease.Failed("Q2"))
	require.Zero(t, nodes[2].Exists(b.Ctx, b.Locker.KeyFor("Q2")).Val(), "the minority key is released")

	servers[0].Stop()
	st := b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, res.Due, st.Closed, "two of three nodes are a quorum")
	require.Zero(t, st.LockErrors)
	b.Check(t, base)

	more, err := orderdemo.Generate(b.Ctx, b.DB.DB, orderdemo.Spec{Orders: 200, DueFraction: 1, SKUs: 200})
	require.NoError(t, err)
	base2 := b.Snapshot(t)
	servers[1].Stop()
	start := time.Now()
	st = b.run(t, orders.RunOptions{PageSize: 100})
	require.Zero(t, st.Closed)
	require.Equal(t, more.Due, st.SkippedLocked)
	require.Equal(t, more.Due, st.LockErrors)
	require.Error(t, st.LockErr)
	require.Zero(t, st.DeadLettered)
	require.Less(t, time.Since(start), 5*time.Second, "fails fast")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	require.Zero(t, nodes[2].DBSize(b.Ctx).Val(), "the minority locks are released")
	b.Check(t, base2)

	servers[0].Start()
	st = b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, more.Due, st.Closed, "quorum again once a node is back")
	b.Check(t, base2)
}

// Redis down: orders are skipped and counted, never closed without their
// lock nor dead-lettered; CloseOrder returns the Redis error.
func TestRedisDownSkipsOrders(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	b := setup(t, paytest.WithLocker(orderlock.Config{Client: c, Timeout: 300 * time.Millisecond}))
	res, base := b.Seed(t, orderdemo.Spec{Orders: 600, DueFraction: 1, CouponFraction: 0.3})

	srv.Stop()
	start := time.Now()
	st := b.run(t, orders.RunOptions{PageSize: 100})
	require.Less(t, time.Since(start), 5*time.Second, "fails fast")
	require.Zero(t, st.Closed)
	require.Equal(t, 300, st.Scanned, "three pages of failed locks stop the run")
	require.Equal(t, 300, st.SkippedLocked)
	require.Equal(t, 300, st.LockErrors)
	require.Error(t, st.LockErr)
	require.Zero(t, st.DeadLettered)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
	require.Zero(t, b.Counts(t).Closed)

	var no string
	require.NoError(t, b.DB.GetContext(b.Ctx, &no, `SELECT order_no FROM order_info LIMIT 1`))
	out, err := b.Closer.CloseOrder(b.Ctx, no)
	require.Error(t, err)
	require.Equal(t, orders.OutcomeSkippedLocked, out)
	b.Check(t, base)

	srv.Start()
	st = b.run(t, orders.RunOptions{PageSize: 100})
	require.Equal(t, res.Due, st.Closed)
	b.Check(t, base)
}

func TestNilIsNotLeaseExpired(t *testing.T) {
	t.Parallel()
	require.False(t, errors.Is(nil, orders.ErrLeaseExpired))
}
