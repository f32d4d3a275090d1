package orderlock

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Each kind of client the executor builds (config redis.mode) is named by
// where it connects; none of them connects here.
func TestNodeName(t *testing.T) {
	t.Parallel()
	single := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000"}})
	sentinel := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"10.0.0.1:26379"}})
	for _, c := range []redis.UniversalClient{single, cluster, sentinel} {
		t.Cleanup(func() { _ = c.Close() })
	}
	require.Equal(t, "redis 10.0.0.1:6379", nodeName(single))
	require.Equal(t, "redis cluster 10.0.0.1:7000,10.0.0.2:7000", nodeName(cluster))
	require.Equal(t, "redis sentinel master", nodeName(sentinel))
}
