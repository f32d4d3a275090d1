package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/redistest"
)

// The private cluster comes up with three masters and a replica each,
// serves keys of every slot through a cluster client, and fails a killed
// master over to its replica.
func TestClusterFailsOverAKilledMaster(t *testing.T) {
	c := redistest.StartCluster(t)
	masters := c.Masters()
	require.Len(t, masters, 3)
	// go-redis reloads the slot map on MOVED, not when a master stops
	// answering: without a short reload interval it would go on dialling
	// the dead master for a minute (its default).
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 500 * time.Millisecond, DialerRetries: 1})
	defer cc.Close()
	ctx := context.Background()
	for i := range 30 {
		require.NoError(t, cc.Set(ctx, fmt.Sprint("k", i), i, 0).Err())
	}
	victim := c.MasterOf("k1")
	replica := c.ReplicaOf(victim)
	// Replication is asynchronous: a kill right after the SET can beat the
	// write to the replica (CI saw the promoted replica at offset 0), so
	// the test waits for the replica's acknowledgement before the kill.
	direct := redis.NewClient(&redis.Options{Addr: victim})
	acked, err := direct.Wait(ctx, 1, 5*time.Second).Result()
	direct.Close()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "replica %s acknowledged the writes", replica)
	c.Node(victim).Kill()
	killed := time.Now()
	promoted := c.WaitPromoted(replica, 20*time.Second)
	t.Logf("replica %s promoted %.1fs after the kill of %s", replica, promoted.Sub(killed).Seconds(), victim)
	require.Equal(t, replica, c.MasterOf("k1"))
	require.Eventually(t, func() bool { return cc.Get(ctx, "k1").Val() == "1" }, 10*time.Second, 50*time.Millisecond,
		"the key, replicated before the kill, read through the promoted replica")
	c.Restart(c.Node(victim))
	c.WaitHealthy(30 * time.Second)
	require.Len(t, c.Masters(), 3)
}
