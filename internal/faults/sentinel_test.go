package faults_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// sentinelMaster is the master name the scenario's Sentinels monitor.
const sentinelMaster = "faults"

// Scenario 11: a private Redis master, one replica and three Sentinels
// (quorum 2) on loopback; two executors in sentinel mode (REDIS_MODE
// sentinel, REDIS_ADDR the three Sentinels) close the same orders while the
// master is killed (SIGKILL) mid-run and the Sentinels promote the replica.
// Lock calls fail while no master answers, so orders are skipped, never
// closed twice nor dead-lettered; the runs finish or fail cleanly; the run
// after the failover, on the promoted replica, closes everything left. Then
// the old master returns as a replica and a graceful SENTINEL FAILOVER
// switches back to it in the middle of two more runs, with the same checks.
func scenarioSentinel(t *testing.T, h *harness, r *report) {
	g := startSentinelGroup(t)
	db := dbtest.New(t)
	orders := 3000 // bounded; the full profile closes more
	if h.p.name == full.name {
		orders = 10000
	}
	res := demo(t, db.DB, orders, 11)
	base := snapshot(t, db.DB)
	e := baseEnv(t, db.DSN, strings.Join(g.sentinels, ","), "faults:").with(
		"REDIS_MODE", "sentinel", "REDIS_MASTER_NAME", sentinelMaster)

	// Paced to last about 4 s, so that the master dies in the middle.
	param := fmt.Sprintf("pageSize=50,maxPerSecond=%d", max(150, res.Due/8))
	runs := []*child{h.start(t, "sentinel-a", e, runArgs(param, "")...), h.start(t, "sentinel-b", e, runArgs(param, "")...)}
	time.Sleep(1200 * time.Millisecond)
	require.False(t, runs[0].exited() && runs[1].exited(), "both runs ended before the master was killed: slow them down")
	// Only a count here: the ledger's queries are not one snapshot, and
	// closes are still committing.
	var before int
	require.NoError(t, db.Get(&before, "SELECT COUNT(*) FROM order_info WHERE status = 2"))
	g.master.kill()
	killed := time.Now()

	closedByRuns, lockErrors, codes := waitFailoverRuns(t, runs)
	mid := requireNoHalfClose(t, db.DB, base, "after the failover runs")
	require.Zero(t, mid.DeadLetters, "dead letters after the failover runs")
	require.Equal(t, mid.Closed, closedByRuns, "closes reported by the runs vs closed in the database")
	r.add("master killed after %d closes; runs exit %v, closed %d, lock_errors %d, left %d", before, codes, closedByRuns, lockErrors, mid.Lost)

	// The Sentinels promote the replica; then the next run closes the rest.
	promoted := g.waitPromoted(t, 30*time.Second)
	r.add("replica promoted %.1fs after the kill", promoted.Sub(killed).Seconds())
	time.Sleep(2100 * time.Millisecond) // locks replicated before the kill expire (ORDER_CLOSE_LOCK_TTL 2s)
	final := h.runJob(t, "sentinel-after", e, "pageSize=500", "")
	require.Equal(t, 0, final.code, "the run after the failover; stderr:\n%s", tail(final.stderr.String(), 20))
	sum := parseSummary(final.stdout.String())
	require.True(t, sum.Found, final.stdout.String())
	require.Zero(t, sum.LockErrors, "lock errors after the failover: %s", final.stdout.String())
	require.Equal(t, mid.Lost, sum.Closed, "the run after the failover closed exactly what was left")
	l := measure(t, db.DB, base, time.Time{})
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due, "due orders")
	r.add("after the failover: all %d closed", l.Closed)

	// The old master comes back, the Sentinels make it a replica; then a
	// graceful failover (SENTINEL FAILOVER) back to it in the middle of
	// two more runs, which go on through the switch or stop cleanly.
	g.master.start(t)
	g.waitReplica(t, g.master, 30*time.Second)
	demo(t, db.DB, orders, 111)
	base = snapshot(t, db.DB)
	runs = []*child{h.start(t, "switch-a", e, runArgs(param, "")...), h.start(t, "switch-b", e, runArgs(param, "")...)}
	time.Sleep(1200 * time.Millisecond)
	require.False(t, runs[0].exited() && runs[1].exited(), "both runs ended before the failover: slow them down")
	sc := redis.NewSentinelClient(&redis.Options{Addr: g.sentinels[0]})
	defer sc.Close()
	closedBefore := func() int {
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM order_info WHERE status = 2 AND order_no LIKE 'F111-%'"))
		return n
	}
	atSwitch := closedBefore()
	switched := time.Now()
	require.NoError(t, sc.Failover(context.Background(), sentinelMaster).Err())
	closedByRuns, lockErrors, codes = waitFailoverRuns(t, runs)
	g.master, g.replica = g.replica, g.master
	promoted = g.waitPromoted(t, 30*time.Second)
	mid = requireNoHalfClose(t, db.DB, base, "after the switch runs")
	require.Zero(t, mid.DeadLetters, "dead letters after the switch runs")
	require.Equal(t, mid.Closed-l.Closed, closedByRuns, "closes reported by the runs vs closed in the database")
	r.add("SENTINEL FAILOVER mid-run: switched in %.1fs; runs exit %v, closed %d (%d after the failover began), lock_errors %d, left %d",
		promoted.Sub(switched).Seconds(), codes, closedByRuns, closedBefore()-atSwitch, lockErrors, mid.Lost)
	time.Sleep(2100 * time.Millisecond)
	final = h.runJob(t, "switch-after", e, "pageSize=500", "")
	require.Equal(t, 0, final.code, "the run after the switch; stderr:\n%s", tail(final.stderr.String(), 20))
	require.Equal(t, mid.Lost, parseSummary(final.stdout.String()).Closed, final.stdout.String())
	l = measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	r.add("after the switch: all %d closed", l.Closed)
}

// waitFailoverRuns waits for runs cut by a failover: each exits 0 or 1
// (never hangs), prints its summary and dead-letters nothing. It returns
// the closes and lock errors they report, and their exit codes.
func waitFailoverRuns(t *testing.T, runs []*child) (closed, lockErrors int, codes []int) {
	t.Helper()
	for _, c := range runs {
		code := c.wait(t, time.Minute)
		require.Contains(t, []int{0, 1}, code, "%s exit code; stderr:\n%s", c.name, tail(c.stderr.String(), 20))
		codes = append(codes, code)
		sum := parseSummary(c.stdout.String())
		require.True(t, sum.Found, "%s printed no summary; stdout:\n%s\nstderr:\n%s", c.name, tail(c.stdout.String(), 20), tail(c.stderr.String(), 20))
		require.Zero(t, sum.DeadLettered, "%s dead-lettered orders because of the failover: %s", c.name, c.stdout.String())
		closed += sum.Closed
		lockErrors += sum.LockErrors
	}
	return closed, lockErrors, codes
}

// redisProc is a private redis-server (or Sentinel) process, killed by its
// pid when the test ends.
type redisProc struct {
	addr string
	args []string
	cmd  *exec.Cmd
	log  string
}

func (p *redisProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// startRedisProc starts redis-server with conf (a config file in a private
// directory, nothing kept on disk) and args, on port, and waits until it
// answers PING.
func startRedisProc(t *testing.T, port int, conf string, args ...string) *redisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not on PATH (apt-get install redis-server): %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "redis.conf")
	conf = fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\nsave \"\"\nappendonly no\nrepl-diskless-sync-delay 0\ndir %s\n", port, dir) + conf
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), args: append([]string{path}, args...),
		log: filepath.Join(dir, "out.log")}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("redis-server %s %v (tail):\n%s", p.addr, args, tail(string(out), 15))
		}
	})
	p.start(t)
	return p
}

// start (re)starts the process with its first configuration and waits
// until it answers PING.
func (p *redisProc) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer logf.Close()
	p.cmd = exec.Command("redis-server", p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	require.NoError(t, p.cmd.Start())
	c := redis.NewClient(&redis.Options{Addr: p.addr, MaxRetries: -1})
	defer c.Close()
	waitFor(t, 10*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil }, "redis-server on "+p.addr+" did not answer")
}

// sentinelGroup is a master, a replica and three Sentinels with quorum 2.
type sentinelGroup struct {
	master, replica *redisProc
	sentinels       []string
}

func startSentinelGroup(t *testing.T) *sentinelGroup {
	t.Helper()
	g := &sentinelGroup{master: startRedisProc(t, freePort(t), "")}
	g.replica = startRedisProc(t, freePort(t), "replicaof "+strings.Replace(g.master.addr, ":", " ", 1)+"\n")
	for range 3 {
		s := startRedisProc(t, freePort(t), fmt.Sprintf("sentinel monitor %s %s 2\n", sentinelMaster, strings.Replace(g.master.addr, ":", " ", 1))+
			fmt.Sprintf("sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n", sentinelMaster, sentinelMaster), "--sentinel")
		g.sentinels = append(g.sentinels, s.addr)
	}
	g.waitReplica(t, g.replica, 30*time.Second)
	return g
}

// waitReplica waits until p is a replica in sync with the master and every
// Sentinel knows it (not down) and the two other Sentinels (a failover needs
// a majority's votes).
func (g *sentinelGroup) waitReplica(t *testing.T, p *redisProc, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: p.addr})
	defer rc.Close()
	waitFor(t, d, func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	}, "redis-server "+p.addr+" did not become a replica in sync")
	for _, a := range g.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		waitFor(t, d, func() bool {
			reps, err1 := sc.Replicas(ctx, sentinelMaster).Result()
			sens, err2 := sc.Sentinels(ctx, sentinelMaster).Result()
			if err1 != nil || err2 != nil || len(sens) < 2 {
				return false
			}
			for _, r := range reps {
				if net.JoinHostPort(r["ip"], r["port"]) == p.addr && !strings.Contains(r["flags"], "down") {
					return true
				}
			}
			return false
		}, "Sentinel "+a+" did not see the replica "+p.addr+" and the other Sentinels")
		sc.Close()
	}
}

// waitPromoted waits until every Sentinel names the replica as the master
// and the replica says it is one; it returns when that was seen.
func (g *sentinelGroup) waitPromoted(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: g.replica.addr})
	defer rc.Close()
	var clients []*redis.SentinelClient
	for _, a := range g.sentinels {
		clients = append(clients, redis.NewSentinelClient(&redis.Options{Addr: a}))
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	waitFor(t, d, func() bool {
		for _, sc := range clients {
			addr, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
			if err != nil || net.JoinHostPort(addr[0], addr[1]) != g.replica.addr {
				return false
			}
		}
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	}, "the Sentinels did not promote the replica")
	return time.Now()
}
