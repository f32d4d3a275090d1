package orderlock_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/orderlock"
)

func TestNewLockerValidation(t *testing.T) {
	t.Parallel()
	_, err := orderlock.New(orderlock.Config{})
	require.Error(t, err, "no Redis")
	c, _ := redistest.Client(t)
	_, err = orderlock.New(orderlock.Config{Client: c, TTL: time.Millisecond})
	require.Error(t, err, "TTL too short")
	l, err := orderlock.New(orderlock.Config{Client: c, Prefix: "shop:"})
	require.NoError(t, err)
	require.Equal(t, "shop:order:close:NO-1", l.KeyFor("NO-1"))
	require.Equal(t, 10*time.Second, l.TTL())
	l, err = orderlock.New(orderlock.Config{Client: c})
	require.NoError(t, err)
	require.Equal(t, "order:close:NO-1", l.KeyFor("NO-1"), "empty prefix by default")
}

// One pipelined acquire: keys already held elsewhere are skipped, the rest
// are set with the TTL; release deletes only keys that still carry our token.
func TestLockerAcquireRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := redistest.Client(t)
	l, err := orderlock.New(orderlock.Config{Client: c, Prefix: prefix, TTL: 5 * time.Second})
	require.NoError(t, err)

	var nos []string
	for i := range 100 {
		nos = append(nos, fmt.Sprintf("L%03d", i))
	}
	for i := 0; i < 100; i += 10 {
		require.NoError(t, c.Set(ctx, l.KeyFor(nos[i]), "someone-else", time.Minute).Err())
	}
	start := time.Now()
	lease, err := l.Acquire(ctx, append(nos, nos[1])) // a duplicate is ignored
	require.NoError(t, err)
	require.Equal(t, 90, lease.Len())
	require.WithinDuration(t, start.Add(5*time.Second), lease.Until(), 200*time.Millisecond)
	require.True(t, lease.ValidFor(time.Second))
	for i, no := range nos {
		require.Equal(t, i%10 != 0, lease.Held(no), no)
		require.False(t, lease.Failed(no))
	}
	ttl, err := c.PTTL(ctx, l.KeyFor(nos[1])).Result()
	require.NoError(t, err)
	require.InDelta(t, 5*time.Second, ttl, float64(time.Second))

	// Someone overwrote one of ours after it expired: release leaves it.
	require.NoError(t, c.Set(ctx, l.KeyFor(nos[2]), "new-holder", time.Minute).Err())
	require.NoError(t, lease.Release(ctx))
	require.NoError(t, lease.Release(ctx), "twice is fine")
	for i, no := range nos {
		v, err := c.Get(ctx, l.KeyFor(no)).Result()
		switch {
		case i%10 == 0:
			require.Equal(t, "someone-else", v)
		case i == 2:
			require.Equal(t, "new-holder", v)
		default:
			require.ErrorIs(t, err, redis.Nil, no)
		}
	}
}

// The release script must run even where it was never loaded.
func TestLockerReleaseAfterScriptFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	l, err := orderlock.New(orderlock.Config{Client: c})
	require.NoError(t, err)
	lease, err := l.Acquire(ctx, []string{"A", "B"})
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	require.NoError(t, lease.Release(ctx))
	n, err := c.Exists(ctx, l.KeyFor("A"), l.KeyFor("B")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// With Redlock, a key is held elsewhere only when a quorum of the nodes
// answered and one says so; a node saying "taken" among too few answers is
// "Redis unreachable".
func TestRedlockHeldElsewhereNeedsQuorumOfAnswers(t *testing.T) {
	t.Parallel()
	servers, nodes := redistest.StartNodes(t, 3)
	ctx := context.Background()
	l, err := orderlock.New(orderlock.Config{Nodes: nodes, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	key := l.KeyFor("R1")
	require.NoError(t, nodes[0].Set(ctx, key, "other", time.Minute).Err())

	// All answer, two give us the key: ours (a majority).
	lease, err := l.Acquire(ctx, []string{"R1"})
	require.NoError(t, err)
	require.True(t, lease.Held("R1"))
	require.NoError(t, lease.Release(ctx))

	// One of the two others down: a quorum answered, one says taken.
	servers[2].Stop()
	lease, err = l.Acquire(ctx, []string{"R1"})
	require.NoError(t, err)
	require.False(t, lease.Held("R1"))
	require.False(t, lease.Failed("R1"), "held elsewhere")

	// Both others down: only the node saying taken answered, no quorum.
	servers[1].Stop()
	lease, err = l.Acquire(ctx, []string{"R1"})
	require.Error(t, err)
	require.False(t, lease.Held("R1"))
	require.True(t, lease.Failed("R1"), "Redis unreachable, not held elsewhere")
}

func TestLeaseNil(t *testing.T) {
	t.Parallel()
	var l *orderlock.Lease
	require.False(t, l.Held("x"))
	require.Zero(t, l.Len())
	require.False(t, l.ValidFor(0))
	require.NoError(t, l.Release(context.Background()))
}

// A Redis that does not answer is named in the lock error: the client's
// own error is often only the deadline, which names nothing.
func TestAcquireErrorNamesTheUnreachableRedis(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	l, err := orderlock.New(orderlock.Config{Client: c})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx, []string{"NO-1", "NO-2"})
	require.ErrorContains(t, err, "lock 2 of 2 orders: node #0: redis "+addr+": ")
	require.Zero(t, lease.Len())
}
