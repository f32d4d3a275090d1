package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a private Redis Cluster on loopback: six redis-server
// processes, three masters with a replica each, as `redis-cli --cluster
// create --cluster-replicas 1` lays them out (masters hold equal ranges of
// slots: 0-5460, 5461-10922, 10923-16383).
type Cluster struct {
	Nodes []*ClusterNode
	t     testing.TB
}

// ClusterNode is one redis-server of a Cluster.
type ClusterNode struct {
	Addr string
	dir  string
	args []string
	cmd  *exec.Cmd
	log  string
}

// NodeTimeout is the clusters' cluster-node-timeout: a master that does not
// answer for this long is failed over to its replica (which takes another
// second or two: the FAIL agreement and the replica's election).
const NodeTimeout = time.Second

// StartCluster starts the six nodes on free loopback ports (each with its
// cluster bus on a free port of its own, `cluster-port`), nothing kept on
// disk, creates the cluster and waits until every node reports it ok and
// each replica is in sync. The nodes are killed by pid when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	for _, cmd := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("redistest: %s not on PATH (apt-get install redis-server redis-tools): %v", cmd, err)
		}
	}
	c := &Cluster{t: t}
	var addrs []string
	for range 6 {
		n := &ClusterNode{dir: t.TempDir()}
		port := freePort(t)
		n.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		n.log = filepath.Join(n.dir, "out.log")
		n.args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", n.dir, "--daemonize", "no", "--protected-mode", "no",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(freePort(t)),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", strconv.Itoa(int(NodeTimeout.Milliseconds())),
			"--cluster-replica-validity-factor", "0", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
		c.Nodes = append(c.Nodes, n)
		t.Cleanup(func() {
			n.Kill()
			if t.Failed() {
				out, _ := os.ReadFile(n.log)
				t.Logf("redis-server %s (tail):\n%s", n.Addr, lastLines(string(out), 10))
			}
		})
		n.start(t)
		addrs = append(addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	out, err := exec.Command("redis-cli", append(args, "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// Addrs are the six nodes' addresses, the seeds of a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// start (re)starts the process and waits until it answers PING.
func (n *ClusterNode) start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	defer logf.Close()
	n.cmd = exec.Command("redis-server", n.args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	waitUntil(t, 10*time.Second, "redis-server "+n.Addr+" did not answer", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
}

// Kill kills the node's process (SIGKILL, as a crash) and waits for it.
func (n *ClusterNode) Kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}

// Restart starts a killed node again; it rejoins the cluster from its
// nodes.conf (a master that was failed over comes back as a replica).
func (c *Cluster) Restart(n *ClusterNode) {
	c.t.Helper()
	n.start(c.t)
}

// Node is the node at addr.
func (c *Cluster) Node(addr string) *ClusterNode {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	c.t.Fatalf("redistest: no cluster node %s", addr)
	return nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	addr, id, master string
	isMaster, failed bool
}

// nodes reads CLUSTER NODES from the first live node that answers.
func (c *Cluster) nodes() ([]clusterNode, error) {
	err := fmt.Errorf("no node runs")
	for _, a := range c.liveAddrs() {
		var ns []clusterNode
		if ns, err = nodesSeenBy(a); err == nil {
			return ns, nil
		}
	}
	return nil, fmt.Errorf("no node answered CLUSTER NODES: %w", err)
}

// nodesSeenBy reads CLUSTER NODES from the node at addr.
func nodesSeenBy(addr string) ([]clusterNode, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	s, err := rc.ClusterNodes(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	return parseClusterNodes(s), nil
}

func parseClusterNodes(s string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, clusterNode{addr: addr, id: f[0], master: f[3],
			isMaster: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")})
	}
	return out
}

// Masters are the addresses of the masters that are not failed, as a live
// node sees them.
func (c *Cluster) Masters() []string {
	c.t.Helper()
	ns, err := c.nodes()
	if err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	var out []string
	for _, n := range ns {
		if n.isMaster && !n.failed {
			out = append(out, n.addr)
		}
	}
	return out
}

// ReplicaOf is the address of a replica of the master at addr.
func (c *Cluster) ReplicaOf(addr string) string {
	c.t.Helper()
	ns, err := c.nodes()
	if err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	id := ""
	for _, n := range ns {
		if n.addr == addr {
			id = n.id
		}
	}
	for _, n := range ns {
		if id != "" && n.master == id && !n.failed {
			return n.addr
		}
	}
	c.t.Fatalf("redistest: no replica of %s", addr)
	return ""
}

// MasterOf is the address of the master that serves key's slot now, as
// the live nodes agree.
func (c *Cluster) MasterOf(key string) string {
	c.t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.liveAddrs()})
	defer cc.Close()
	ctx := context.Background()
	cc.ReloadState(ctx)
	n, err := cc.MasterForKey(ctx, key)
	if err != nil {
		c.t.Fatalf("redistest: master of %q: %v", key, err)
	}
	return n.Options().Addr
}

// liveAddrs are the addresses of the nodes whose process runs.
func (c *Cluster) liveAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		if n.cmd != nil && n.cmd.ProcessState == nil {
			out = append(out, n.Addr)
		}
	}
	return out
}

// WaitHealthy waits until every live node says cluster_state:ok and knows
// three masters that are not failed, and every replica's link to its
// master is up.
func (c *Cluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	ctx := context.Background()
	waitUntil(c.t, d, "the Redis Cluster did not become healthy", func() bool {
		for _, a := range c.liveAddrs() {
			rc := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			info, err := rc.ClusterInfo(ctx).Result()
			repl, rerr := rc.Info(ctx, "replication").Result()
			rc.Close()
			if err != nil || rerr != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return false
			}
		}
		ns, err := c.nodes()
		if err != nil {
			return false
		}
		masters := 0
		for _, n := range ns {
			if n.isMaster && !n.failed {
				masters++
			}
		}
		return masters == 3
	})
}

// WaitPromoted waits until every live node sees the node at addr as a
// master (its replica took over after a kill or a CLUSTER FAILOVER); it
// returns when that was seen.
func (c *Cluster) WaitPromoted(addr string, d time.Duration) time.Time {
	c.t.Helper()
	waitUntil(c.t, d, "the replica "+addr+" was not promoted", func() bool {
		for _, a := range c.liveAddrs() {
			ns, err := nodesSeenBy(a)
			if err != nil || !slices.ContainsFunc(ns, func(n clusterNode) bool { return n.addr == addr && n.isMaster && !n.failed }) {
				return false
			}
		}
		return true
	})
	return time.Now()
}

func waitUntil(t testing.TB, d time.Duration, msg string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s within %s", msg, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
