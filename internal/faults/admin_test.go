package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// Scenario 4: the admin is unreachable while runs finish, and the executor is
// restarted meanwhile (once killed with SIGKILL, once stopped with SIGTERM).
// The results wait in the callback spool on disk; after the admin returns,
// every callback is delivered exactly once and the spool is empty.
//
// Bounded: the admin returns while the executor is down, so the next start
// delivers at once. Full: additionally the executor is already up again when
// the admin returns, and the spool's 30 s retry delivers.
func scenarioAdminDown(t *testing.T, h *harness, r *report) {
	db, res, base, e := seeded(t, 1500, 4)
	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	e = serveEnv(e, admin, freePort(t))
	spoolDir := e["XXL_JOB_EXECUTOR_LOGPATH"] // the spool is under it

	admin.SetMode(xxljobtest.DownClose)
	var want []int64
	runAll := func(s *served, first int64, n int) {
		for i := range n {
			id := first + int64(i)
			// Shards of one broadcast: together they cover every order.
			s.trigger(t, 10+i, id, "pageSize=100", i, n)
			want = append(want, id)
		}
		waitSpooled(t, spoolDir, want)
	}

	// Executor A: runs finish with the admin down; killed with SIGKILL.
	a := h.serve(t, "serve-A", e)
	runAll(a, 1000, h.p.adminRuns/2)
	a.kill9()
	// Executor B (same address, same log path): more runs, then SIGTERM.
	admin.SetMode(xxljobtest.Down503)
	b := h.serve(t, "serve-B", e)
	runAll(b, 2000, h.p.adminRuns-h.p.adminRuns/2)
	// A run still going at SIGTERM: shutdown waits for it; its result stays
	// in the spool.
	p := xxljobtest.Trigger(99, "demoJob", 2999)
	p.ExecutorParams = "1"
	env, err := b.client.Run(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, env.MsgString())
	time.Sleep(200 * time.Millisecond)
	b.stop(t)
	want = append(want, p.LogID)
	waitSpooled(t, spoolDir, want)
	require.Empty(t, admin.Callbacks(), "nothing reached the admin while it was down")
	r.add("%d callbacks spooled across a SIGKILL and a SIGTERM restart (one of a run still going at SIGTERM)", len(want))

	var c *served
	if h.p.adminRetryWay {
		// The executor is up first; the admin returns later.
		c = h.serve(t, "serve-C", e)
		time.Sleep(time.Second) // its start-time retry fails
		admin.SetMode(xxljobtest.Up)
		r.add("admin back while the executor runs: spool retry")
	} else {
		admin.SetMode(xxljobtest.Up)
		c = h.serve(t, "serve-C", e)
		r.add("admin back while the executor was down: delivered at start")
	}
	began := time.Now()
	for _, id := range want {
		cb, err := admin.WaitCallback(id, 45*time.Second)
		require.NoError(t, err)
		require.Equal(t, 200, cb.HandleCode, "log %d: %s", id, cb.HandleMsg)
		if id != p.LogID {
			require.True(t, parseSummary(cb.HandleMsg).Found, cb.HandleMsg)
		}
	}
	r.add("all delivered %.1fs after", time.Since(began).Seconds())
	waitFor(t, 10*time.Second, func() bool { return len(spooled(t, spoolDir)) == 0 }, "spool not emptied")
	c.stop(t)

	repeats := 0
	for _, id := range want {
		repeats += admin.Repeats(id)
	}
	require.Zero(t, repeats, "callbacks delivered more than once")
	require.Len(t, admin.Callbacks(), len(want), "callbacks for unknown runs")
	closedByRuns := 0
	for _, cb := range admin.Callbacks() {
		closedByRuns += parseSummary(cb.HandleMsg).Closed
	}
	l := measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
	require.Equal(t, l.Closed, closedByRuns, "closes reported in the callbacks")
	r.add("callbacks=%d delivered once each (repeats %d)", len(want), repeats)
}

// spooled returns the logIds waiting in the executor's callback spool.
func spooled(t *testing.T, logPath string) map[int64]int {
	t.Helper()
	m, err := xxljobtest.Spooled(logPath)
	require.NoError(t, err)
	return m
}

func waitSpooled(t *testing.T, dir string, ids []int64) {
	t.Helper()
	waitFor(t, 60*time.Second, func() bool {
		got := spooled(t, dir)
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	}, fmt.Sprintf("callbacks of %v not spooled", ids))
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
