package orders_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// startCluster starts a three-master Redis Cluster of private processes and
// returns a cluster client.
func startCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	dir := t.TempDir()
	var addrs []string
	for i := range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		nodeDir := fmt.Sprintf("%s/n%d", dir, i)
		require.NoError(t, os.MkdirAll(nodeDir, 0o755))
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", nodeDir+"/nodes.conf",
			"--save", "", "--appendonly", "no", "--dir", nodeDir)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for _, a := range addrs {
		require.Eventually(t, func() bool {
			c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			defer c.Close()
			return c.Ping(context.Background()).Err() == nil
		}, 10*time.Second, 20*time.Millisecond)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	require.NoError(t, err, string(out))
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	require.Eventually(t, func() bool {
		info, err := c.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 20*time.Second, 50*time.Millisecond)
	return c
}

// On a Cluster the page's keys spread over every slot owner; pipelines and
// the single-key release script work there, and a run closes everything.
func TestLockerOnCluster(t *testing.T) {
	t.Parallel()
	cluster := startCluster(t)
	b := setup(t, paytest.WithLocker(orderlock.Config{Client: cluster}))
	res, base := b.Seed(t, orderdemo.Spec{Orders: 600, DueFraction: 1, CouponFraction: 0.3})

	var nos []string
	for i := range 200 {
		nos = append(nos, fmt.Sprintf("K%d", i))
	}
	lease, err := b.Locker.Acquire(b.Ctx, nos)
	require.NoError(t, err)
	require.Equal(t, 200, lease.Len())
	again, err := b.Locker.Acquire(b.Ctx, nos)
	require.NoError(t, err)
	require.Zero(t, again.Len(), "held keys are taken, not errors")
	require.NoError(t, lease.Release(b.Ctx))
	n := 0
	for _, no := range nos {
		n += int(cluster.Exists(b.Ctx, b.Locker.KeyFor(no)).Val())
	}
	require.Zero(t, n, "every key released")

	st := b.run(t, orders.RunOptions{PageSize: 200})
	require.Equal(t, res.Due, st.Closed)
	require.Zero(t, st.LockErrors)
	b.Check(t, base)

	// Pay's redsync mutex runs on the Cluster too.
	b.Place(t, "CL-1", true, payment.Item{SKUID: 1, Quantity: 1})
	out, err := b.Svc.Pay(b.Ctx, "CL-1")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)
	b.Check(t, base)
}
