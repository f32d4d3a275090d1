package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// Scenario 9: `kill -9` of `executor serve` in the middle of an
// orderTimeoutCloseJob run from the admin, then a restart on the same log
// path. The admin receives one failure callback for that run ("executor
// restarted during the run"), the close-run record says the same once, a
// run finished after the restart is reported as it ended and nothing twice
// (also across a second restart), and a last run closes what was left.
func scenarioKill9Report(t *testing.T, h *harness, r *report) {
	db, res, base, e := seeded(t, 3000, 9)
	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	e = serveEnv(e, admin, freePort(t))

	// Paced to last about 3 s, so the kill lands while it works.
	a := h.serve(t, "serve-A", e)
	killed := a.trigger(t, 91, 9001, fmt.Sprintf("pageSize=50,maxPerSecond=%d", max(100, res.Due/3)), 0, 1)
	waitFor(t, 20*time.Second, func() bool { return closeLogs(t, db.DB) >= res.Due/3 }, "the run did not get a third of the way")
	a.kill9()
	closedBefore := closeLogs(t, db.DB)
	require.Less(t, closedBefore, res.Due, "the run ended before the kill")
	_, reported := admin.Callback(killed.LogID)
	require.False(t, reported, "the killed run reported before the restart")
	r.add("killed after %d of %d closes", closedBefore, res.Due)

	b := h.serve(t, "serve-B", e)
	began := time.Now()
	cb, err := admin.WaitCallback(killed.LogID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 500, cb.HandleCode)
	require.Contains(t, cb.HandleMsg, "executor restarted during the run")
	r.add("failure callback %.1fs after the restart", time.Since(began).Seconds())
	waitFor(t, 10*time.Second, func() bool { return len(interruptedRecords(t, db.DB, killed.LogID)) == 1 }, "no close-run record of the killed run")
	require.Equal(t, cb.HandleMsg, interruptedRecords(t, db.DB, killed.LogID)[0])
	require.Contains(t, b.runLog(t, killed), "executor restarted during the run")

	// A run that finishes is reported as it ended, not as interrupted.
	time.Sleep(2100 * time.Millisecond) // the killed process's order locks expire
	rest := b.trigger(t, 92, 9002, "pageSize=200", 0, 1)
	cb, err = admin.WaitCallback(rest.LogID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	sum := parseSummary(cb.HandleMsg)
	require.True(t, sum.Found, cb.HandleMsg)
	require.Zero(t, sum.SkippedLocked, "orders still locked")
	b.stop(t)

	// Another restart reports nothing again.
	c := h.serve(t, "serve-C", e)
	time.Sleep(time.Second) // the start-time spool retry and the hand-over
	c.stop(t)
	for _, id := range []int64{killed.LogID, rest.LogID} {
		require.Zero(t, admin.Repeats(id), "log %d reported more than once", id)
	}
	require.Len(t, admin.Callbacks(), 2, "callbacks for other runs")
	require.Len(t, interruptedRecords(t, db.DB, killed.LogID), 1, "the killed run recorded more than once")
	require.Empty(t, interruptedRecords(t, db.DB, rest.LogID), "the finished run recorded as interrupted")
	var own int
	require.NoError(t, db.Get(&own, `SELECT COUNT(*) FROM order_close_run WHERE log_id = ? AND error = ''`, rest.LogID))
	require.Equal(t, 1, own, "the finished run's own record")
	r.add("one callback and one record each (repeats 0); the next run closed %d", sum.Closed)

	l := measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
	require.Equal(t, l.Closed-closedBefore, sum.Closed, "the next run closed what the killed one left")
}

func closeLogs(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM order_close_log`))
	return n
}

// interruptedRecords returns the errors of the close-run records of logID
// that say the executor restarted during the run.
func interruptedRecords(t *testing.T, db *sqlx.DB, logID int64) []string {
	t.Helper()
	var errs []string
	require.NoError(t, db.Select(&errs, `SELECT error FROM order_close_run WHERE log_id = ? ORDER BY id`, logID))
	var out []string
	for _, e := range errs {
		if strings.HasPrefix(e, "executor restarted during the run") {
			out = append(out, e)
		}
	}
	return out
}
