package faults_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// failFast bounds a run while Redis is down: lock calls fail at once
// (connection refused) or after the locker's per-call timeout, and the run
// stops after three pages whose locks all failed.
const failFast = 3 * time.Second

// Scenario 3: the suite's private Redis is stopped during a run for a while
// (5 s bounded, 30 s full). Lock acquisition fails fast; the orders are
// skipped, never closed without their lock nor dead-lettered; each run says
// so in its log and its handleMsg; once Redis is back the next run closes
// them. Then Redis is flushed again and again while two executors close the
// same orders: nothing is closed twice.
func scenarioRedisOutage(t *testing.T, h *harness, r *report) {
	ctx := context.Background()
	db := dbtest.New(t)
	rs := redistest.StartServer(t)
	res := demo(t, db.DB, 3000, 3)
	base := snapshot(t, db.DB)
	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	e := baseEnv(t, db.DSN, rs.Addr, "faults:")
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := h.serve(t, "serve-1", serveEnv(e, admin, freePort(t)).with("EXECUTOR_API_ADDR", apiAddr, "EXECUTOR_API_TOKEN", apiToken))

	// A run that Redis leaves half-way.
	var logID int64 = 100
	first := s.trigger(t, 1, logID, "pageSize=50,maxPerSecond=800", 0, 1)
	time.Sleep(600 * time.Millisecond)
	rs.Stop()
	stopped := time.Now()
	cb, err := admin.WaitCallback(logID, 30*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(stopped), failFast, "the run did not stop fast once Redis was gone")
	sum := parseSummary(cb.HandleMsg)
	require.True(t, sum.Found, cb.HandleMsg)
	require.Positive(t, sum.LockErrors, "handleMsg reports the lock errors: %s", cb.HandleMsg)
	require.Contains(t, s.runLog(t, first), "could not reach Redis", "the run log says why orders were skipped")
	require.Zero(t, sum.DeadLettered)
	l := requireNoHalfClose(t, db.DB, base, "after Redis stopped mid-run")
	require.Positive(t, l.Lost, "Redis stopped after the run had finished")
	r.add("run cut by the outage: code=%d closed=%d lock_errors=%d", cb.HandleCode, sum.Closed, sum.LockErrors)

	// Runs during the outage close nothing and fail fast.
	runs, slowest := 0, time.Duration(0)
	for time.Since(stopped) < h.p.redisOutage {
		logID++
		began := time.Now()
		s.trigger(t, 1, logID, "pageSize=200", 0, 1)
		cb, err := admin.WaitCallback(logID, 30*time.Second)
		require.NoError(t, err)
		took := time.Since(began)
		slowest = max(slowest, took)
		require.Less(t, took, failFast, "a run with Redis down took %s", took)
		sum := parseSummary(cb.HandleMsg)
		require.True(t, sum.Found, cb.HandleMsg)
		require.Zero(t, sum.Closed, "closed without a lock: %s", cb.HandleMsg)
		require.Positive(t, sum.LockErrors, cb.HandleMsg)
		runs++
		time.Sleep(time.Second)
	}
	l2 := requireNoHalfClose(t, db.DB, base, "during the outage")
	require.Equal(t, l.Closed, l2.Closed, "orders closed while Redis was down")
	require.Zero(t, l2.DeadLetters, "orders dead-lettered because Redis was down")
	r.add("outage %s: %d runs, each closed 0, slowest %s", h.p.redisOutage, runs, slowest.Round(time.Millisecond))

	// Redis is back. The executor's Redis client keeps failing fast for a
	// moment (go-redis backs off after failed dials and retries them about
	// once a second); once its readiness probe (a PING on the same client)
	// is green, the next run closes everything that was skipped.
	require.Equal(t, http.StatusServiceUnavailable, readyz(t, apiAddr), "/readyz while Redis is down")
	rs.Start()
	back := time.Now()
	waitFor(t, 20*time.Second, func() bool { return readyz(t, apiAddr) == http.StatusOK }, "the executor did not see Redis again")
	r.add("ready again %.1fs after Redis returned", time.Since(back).Seconds())
	logID++
	s.trigger(t, 1, logID, "pageSize=500", 0, 1)
	cb, err = admin.WaitCallback(logID, 60*time.Second)
	require.NoError(t, err)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.NotContains(t, cb.HandleMsg, "lock_errors")
	require.Equal(t, l2.Lost, parseSummary(cb.HandleMsg).Closed, cb.HandleMsg)
	l = measure(t, db.DB, base, time.Time{})
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
	r.add("after Redis returned: all %d closed", l.Closed)

	// Flushes: two executors on the same orders while the lock keys vanish.
	demo(t, db.DB, 3000, 33)
	base = snapshot(t, db.DB)
	s2 := h.serve(t, "serve-2", serveEnv(e, admin, freePort(t)))
	flusher := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer flusher.Close()
	stop := make(chan struct{})
	var flushes atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if flusher.FlushAll(ctx).Err() == nil {
					flushes.Add(1)
				}
			}
		}
	})
	a, b := logID+1, logID+2
	s.trigger(t, 2, a, "pageSize=20,maxPerSecond=1500", 0, 1)
	s2.trigger(t, 2, b, "pageSize=20,maxPerSecond=1500", 0, 1)
	cba, err1 := admin.WaitCallback(a, 60*time.Second)
	cbb, err2 := admin.WaitCallback(b, 60*time.Second)
	close(stop)
	wg.Wait()
	require.NoError(t, err1)
	require.NoError(t, err2)
	closedByRuns := parseSummary(cba.HandleMsg).Closed + parseSummary(cbb.HandleMsg).Closed
	l = measure(t, db.DB, base, time.Time{})
	requireNoHalfClose(t, db.DB, base, "after the flushes")
	prev := res.Due
	require.Equal(t, l.Closed-prev, closedByRuns, "closes reported by the two runs vs closed in the database: %s | %s", cba.HandleMsg, cbb.HandleMsg)
	left := l.Lost
	if left > 0 { // skipped by both (each saw the other's lock): the next run
		logID = b + 1
		s.trigger(t, 3, logID, "", 0, 1)
		cb, err := admin.WaitCallback(logID, 60*time.Second)
		require.NoError(t, err)
		require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	}
	l = measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	r.add("flushed %d times under 2 executors: closed by them %d (left for the next run %d)", flushes.Load(), closedByRuns, left)
	require.Positive(t, flushes.Load())

	s.stop(t)
	s2.stop(t)
}

// readyz returns the status of the API port's readiness probe.
func readyz(t *testing.T, apiAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/readyz")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
