package app

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/redistest"
)

// Readiness follows the Redlock quorum: ready while a majority of the lock
// nodes answers, not ready (naming the nodes down) when fewer do, ready
// again when a node is back. Private redis-server processes, stopped by
// the test; the shared server is not one of the nodes.
func TestLockQuorumReadiness(t *testing.T) {
	t.Parallel()
	servers := []*redistest.Server{redistest.StartServer(t), redistest.StartServer(t), redistest.StartServer(t)}
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr)
	}
	nodes := newLockNodes(config.Redis{LockNodes: addrs})
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	check := lockQuorumCheck(nodes)
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return check(ctx)
	}

	require.NoError(t, probe())
	servers[0].Stop()
	require.NoError(t, probe(), "2 of 3 is a majority")
	servers[2].Stop()
	err := probe()
	require.ErrorContains(t, err, "lock quorum lost: 1 of 3 lock nodes answer, 2 needed")
	require.ErrorContains(t, err, "lock node "+servers[0].Addr)
	require.ErrorContains(t, err, "lock node "+servers[2].Addr)
	require.NotContains(t, err.Error(), servers[1].Addr)
	servers[2].Start()
	require.Eventually(t, func() bool { return probe() == nil }, 10*time.Second, 50*time.Millisecond, "ready again with 2 of 3")
}
