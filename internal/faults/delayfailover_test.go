package faults_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// delayPrefix is the delayed-task key prefix of scenarios 14 and 15.
const delayPrefix = "faults:delay:"

// delayReconcile is their delay.reconcileInterval: the bound on how long a
// task whose timer entry the failover lost waits.
const delayReconcile = 3 * time.Second

// delayTopology is the Redis a delayed-task failover scenario runs on.
type delayTopology struct {
	redis  config.Redis // as the executors are configured (REDIS_* below)
	env    env          // REDIS_MODE, REDIS_ADDR, ... and DELAY_TIMER_SHARDS
	shards int
	// kill fails the master that matters (the one holding most timer
	// shards) and returns when; promoted waits until its replica took over
	// and returns when that was seen.
	kill     func() time.Time
	promoted func() time.Time
}

// delayFailover is scenarios 14 and 15: two `executor serve` processes run
// the delayed tasks that the test, in the order service's place, registers
// for every due order (a stream, each task due 300 ms after it is
// registered), and the Redis master is killed a third of the way through.
// Registrations whose timer write fails meanwhile are committed all the
// same and wait for the reconciler. Checked: every PENDING task is back on
// the timer within the reconcile interval (and a little) of the promotion;
// every task ends DONE, none FAILED; every due order closed exactly once,
// compensated, nothing dead-lettered.
func delayFailover(t *testing.T, h *harness, r *report, topo delayTopology, seed uint64) {
	ctx := context.Background()
	db := dbtest.New(t)
	demo(t, db.DB, 1500, seed)
	base := snapshot(t, db.DB)
	var due []string
	require.NoError(t, db.Select(&due, `SELECT order_no FROM order_info
WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= NOW() ORDER BY id`))

	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	e := baseEnv(t, db.DSN, strings.Join(topo.redis.Addr, ","), "faults:").with(
		"DELAY_ENABLED", "true", "DELAY_KEY_PREFIX", delayPrefix, "DELAY_TIMER_SHARDS", strconv.Itoa(topo.shards),
		"DELAY_RECONCILE_INTERVAL", delayReconcile.String(), "DELAY_NOT_NOW_BACKOFF_MAX", "2s")
	for k, v := range topo.env {
		e[k] = v
	}
	for i := range 2 {
		s := h.serve(t, fmt.Sprint("delay-", i), serveEnv(e, admin, freePort(t)))
		defer s.stop(t)
	}

	rdb, err := app.NewRedis(topo.redis)
	require.NoError(t, err)
	defer rdb.Close()
	var logs syncbuf.Buffer
	client, err := delay.NewClient(db.DB, rdb, delay.ClientConfig{KeyPrefix: delayPrefix, TimerShards: topo.shards,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)

	// The stream: about 150 registrations a second.
	var wg sync.WaitGroup
	var regErrs []error
	third := make(chan struct{})
	began := time.Now()
	var streamed time.Duration
	wg.Go(func() {
		defer func() { streamed = time.Since(began) }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i, no := range due {
			if i == len(due)/3 {
				close(third)
			}
			if i%3 == 0 {
				<-tick.C
			}
			reg := delay.OrderTimeoutClose(no, time.Time{})
			reg.Delay = 300 * time.Millisecond
			if _, _, err := client.Register(ctx, reg); err != nil {
				regErrs = append(regErrs, fmt.Errorf("register %s: %w", no, err))
			}
		}
	})
	<-third
	killed := topo.kill()
	promoted := topo.promoted()
	var before int64
	require.NoError(t, db.Get(&before, "SELECT COALESCE(MAX(id), 0) FROM job_delay_task"))

	// Every task registered by then that is PENDING is on the timer again
	// within the reconcile interval of the promotion (the refill runs on
	// one executor per interval; a second for the pass itself). A popped
	// task is off the timer for the moment of its claim: looked at again.
	var back time.Duration
	require.Eventually(t, func() bool {
		missing, err := pendingOffTimer(ctx, db.DB, rdb, topo.shards, before)
		back = time.Since(promoted)
		return err == nil && missing == 0
	}, delayReconcile+5*time.Second, 100*time.Millisecond, "PENDING tasks missing from the timer")
	require.LessOrEqual(t, back, delayReconcile+2*time.Second, "timer entries back within the reconcile interval")
	wg.Wait()
	require.Empty(t, regErrs, "registrations refused (the database is up: none should be)")
	unscheduled := strings.Count(logs.String(), "timer not told of a new task")
	r.add("%d tasks registered over %.1fs; master killed after a third, replica promoted %.1fs later",
		len(due), streamed.Seconds(), promoted.Sub(killed).Seconds())

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM job_delay_task WHERE status <> 'DONE'"))
		return n == 0
	}, time.Minute, 100*time.Millisecond, "every task DONE")
	allDone := time.Since(began.Add(streamed))
	l := measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, len(due), l.Closed, "every order with a task closed")
	var retried int
	require.NoError(t, db.Get(&retried, "SELECT COUNT(*) FROM job_delay_task WHERE retry_count > 0"))
	r.add("%d registrations not told to the timer during the failover; all on the timer %.1fs after the promotion; all DONE %.1fs after the last registration; %d tasks spent a retry",
		unscheduled, back.Seconds(), allDone.Seconds(), retried)
}

// pendingOffTimer counts PENDING tasks up to id upTo that no timer shard
// holds.
func pendingOffTimer(ctx context.Context, db *sqlx.DB, rdb redis.UniversalClient, shards int, upTo int64) (int, error) {
	var ids []string
	if err := db.SelectContext(ctx, &ids, "SELECT CAST(id AS CHAR) FROM job_delay_task WHERE status = 'PENDING' AND id <= ?", upTo); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	keys := []string{delayPrefix + "timer"}
	if shards > 1 {
		keys = keys[:0]
		for i := range shards {
			keys = append(keys, fmt.Sprintf("%stimer:{%d}", delayPrefix, i))
		}
	}
	on := make([]bool, len(ids))
	for _, k := range keys {
		scores, err := rdb.ZMScore(ctx, k, ids...).Result()
		if err != nil {
			return 0, err
		}
		for i, s := range scores {
			on[i] = on[i] || s != 0
		}
	}
	missing := 0
	for _, ok := range on {
		if !ok {
			missing++
		}
	}
	return missing, nil
}

// Scenario 14: delayed tasks on a private 6-node Redis Cluster (three
// masters, a replica each), the timer split over 6 shards, the master
// holding most of them killed mid-stream.
func scenarioRedisCluster(t *testing.T, h *harness, r *report) {
	c := redistest.StartCluster(t)
	const shards = 6
	held := map[string]int{}
	for i := range shards {
		held[c.MasterOf(fmt.Sprintf("%stimer:{%d}", delayPrefix, i))]++
	}
	require.Len(t, held, 3, "the shards spread over the three masters: %v", held)
	victim := ""
	for a, n := range held {
		if victim == "" || n > held[victim] {
			victim = a
		}
	}
	replica := c.ReplicaOf(victim)
	r.add("shards per master %v", shardCounts(held))
	delayFailover(t, h, r, delayTopology{
		redis:  config.Redis{Mode: "cluster", Addr: c.Addrs()},
		env:    env{"REDIS_MODE": "cluster", "REDIS_ADDR": strings.Join(c.Addrs(), ",")},
		shards: shards,
		kill: func() time.Time {
			c.Node(victim).Kill()
			return time.Now()
		},
		promoted: func() time.Time { return c.WaitPromoted(replica, 30*time.Second) },
	}, 14)
}

// shardCounts are the shards each master holds, fewest first.
func shardCounts(held map[string]int) []int {
	var out []int
	for _, n := range held {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Scenario 15: delayed tasks under a Sentinel failover (scenario 11's
// group: a master, a replica, three Sentinels with quorum 2), the timer in
// its single key, the master killed mid-stream.
func scenarioSentinelDelay(t *testing.T, h *harness, r *report) {
	g := startSentinelGroup(t)
	delayFailover(t, h, r, delayTopology{
		redis:  config.Redis{Mode: "sentinel", Addr: g.sentinels, MasterName: sentinelMaster},
		env:    env{"REDIS_MODE": "sentinel", "REDIS_ADDR": strings.Join(g.sentinels, ","), "REDIS_MASTER_NAME": sentinelMaster},
		shards: 1,
		kill: func() time.Time {
			g.master.kill()
			return time.Now()
		},
		promoted: func() time.Time { return g.waitPromoted(t, 30*time.Second) },
	}, 15)
}
