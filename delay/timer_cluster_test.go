package delay

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/redistest"
)

// On a Redis Cluster the shards spread over the masters (4 shards over 3
// masters: every master holds one). With one master killed, a look still
// pops the shards of the others (and says which did not answer); once its
// replica has taken over, that shard's entries are popped too.
func TestShardedTimerOnClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	// As internal/app's NewRedis builds it for a cluster.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second, DialerRetries: 1})
	defer rdb.Close()
	ctx := context.Background()
	tm := redisTimerOf(t, rdb, "delay:", 4)
	masterOf := map[string]string{}
	held := map[string]int{}
	for _, k := range tm.keys {
		masterOf[k] = c.MasterOf(k)
		held[masterOf[k]]++
	}
	require.Len(t, held, 3, "every master holds a shard: %v", masterOf)

	now := time.Now().UTC()
	require.NoError(t, tm.add(ctx, entriesAt(1, 401, now.Add(-time.Second))...))
	victim := masterOf[tm.keys[3]]
	replica := c.ReplicaOf(victim)
	require.Eventually(t, func() bool { // its shard replicated before the kill
		n, err := zcardOn(replica, tm.keys[3])
		return err == nil && n == int64(len(members(t, rdb, tm.keys[3])))
	}, 5*time.Second, 20*time.Millisecond)
	c.Node(victim).Kill()

	ids, _, err := tm.pop(ctx, now, 1000)
	require.Error(t, err, "a shard did not answer")
	require.NotEmpty(t, ids, "the shards of the other masters were popped all the same")
	seen := map[int64]bool{}
	for _, id := range ids {
		require.NotEqual(t, masterOf[tm.keys[shardOf(id, 4)]], victim)
		seen[id] = true
	}
	c.WaitPromoted(replica, 20*time.Second)
	twice := 0
	require.Eventually(t, func() bool {
		ids, _, err := tm.pop(ctx, now, 1000)
		for _, id := range ids {
			if seen[id] {
				twice++
			}
			seen[id] = true
		}
		return err == nil && len(seen) == 400
	}, 10*time.Second, 100*time.Millisecond, "every entry popped")
	require.Zero(t, twice, "entries popped twice")
}

// zcardOn counts a key's members on one node (a replica: READONLY).
func zcardOn(addr, key string) (int64, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	ctx := context.Background()
	pipe := rc.Pipeline()
	pipe.ReadOnly(ctx)
	n := pipe.ZCard(ctx, key)
	_, err := pipe.Exec(ctx)
	return n.Val(), err
}
