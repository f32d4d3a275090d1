package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/redistest"
)

// The client NewRedis builds for a Redis Cluster (redis.mode cluster, and
// auto with several addresses) follows a failover within a few seconds:
// once the replica of a killed master has taken over, commands for its
// slots reach it. go-redis's default (the slot map read again once a
// minute, and not on a dead master) kept failing them for that minute.
func TestClusterClientFollowsAFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	ctx := context.Background()
	for _, mode := range []string{"cluster", "auto"} {
		cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
			v, ok := map[string]string{"REDIS_MODE": mode, "REDIS_ADDR": strings.Join(c.Addrs(), ",")}[k]
			return v, ok
		})
		require.NoError(t, err)
		rdb, err := NewRedis(cfg.Redis)
		require.NoError(t, err)
		defer rdb.Close()
		key := "failover:" + mode
		require.NoError(t, rdb.Set(ctx, key, mode, 0).Err())
		victim := c.MasterOf(key)
		replica := c.ReplicaOf(victim)
		waitReplicated(t, replica, key)
		c.Node(victim).Kill()
		promoted := c.WaitPromoted(replica, 20*time.Second)
		require.Eventually(t, func() bool { return rdb.Get(ctx, key).Val() == mode }, 5*time.Second, 50*time.Millisecond,
			"%s mode: the key read through the promoted replica", mode)
		t.Logf("%s mode: read %.1fs after the promotion", mode, time.Since(promoted).Seconds())
		c.Restart(c.Node(victim))
		c.WaitHealthy(30 * time.Second)
	}
}

// waitReplicated waits until the replica at addr holds key.
func waitReplicated(t *testing.T, addr, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, err := readOnlyGet(addr, key)
		return err == nil && out != ""
	}, 5*time.Second, 20*time.Millisecond, "key %s replicated to %s", key, addr)
}

// readOnlyGet reads key on a replica (READONLY, then GET).
func readOnlyGet(addr, key string) (string, error) {
	cc, err := NewRedis(config.Redis{Mode: "single", Addr: []string{addr}})
	if err != nil {
		return "", err
	}
	defer cc.Close()
	ctx := context.Background()
	pipe := cc.Pipeline()
	pipe.ReadOnly(ctx)
	get := pipe.Get(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("read %s on %s: %w", key, addr, err)
	}
	return get.Val(), nil
}
