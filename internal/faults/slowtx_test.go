package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// slowCloseSQL injects the delay: a trigger on the close log, inside every
// close transaction after the status CAS and before the lease check and
// COMMIT, sleeps 1.5 s once per transaction (the rows of one close share
// closed_at) — only on connections of the "slow" executor, which its DSN
// marks with the session variable wait_timeout = 28799.
var slowCloseSQL = []string{
	`CREATE TRIGGER fault_slow_close BEFORE INSERT ON order_close_log FOR EACH ROW
BEGIN
  IF @@session.wait_timeout = 28799 AND NOT (NEW.closed_at <=> @fault_closed_at) THEN
    SET @fault_closed_at = NEW.closed_at;
    DO SLEEP(1.5);
  END IF;
END`,
}

// Scenario 6: close transactions slower than the lock expiry. The slow
// executor's every close outlives its 1 s lease. It starts first; 1.15 s
// later, when its first page's locks have expired but its transaction still
// holds the rows, two more start: one on the same lock keys (it gets the
// expired locks and waits for the rows), one on other lock keys (its locks
// exclude nobody, as after a Redis flush or failover: only the row locks and
// the status CAS stand between it and a second close). The slow transaction
// rolls back at its lease check; the others close each order once. The
// orders use many SKUs so that closes of different pages rarely wait for
// the same stock row.
func scenarioSlowTx(t *testing.T, h *harness, r *report) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	res := demoSKUs(t, db.DB, h.p.slowOrders, 6, 20000)
	for _, q := range slowCloseSQL {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	base := snapshot(t, db.DB)
	// Lease 1 s, the shortest allowed (minus drift and the 200 ms commit
	// margin: about 790 ms to commit in).
	e := baseEnv(t, db.DSN, redistest.Addr(), prefix).with("ORDER_CLOSE_LOCK_TTL", "1s")
	slowDSN := db.DSN + "&wait_timeout=28799"
	if !strings.Contains(db.DSN, "?") {
		slowDSN = db.DSN + "?wait_timeout=28799"
	}

	const param = "pageSize=40"
	slow := h.start(t, "slow", e.with("MYSQL_DSN", slowDSN), runArgs(param, "")...)
	time.Sleep(1150 * time.Millisecond)
	cs := []*child{
		slow,
		h.start(t, "same-keys", e, runArgs(param, "")...),
		h.start(t, "other-keys", e.with("ORDER_CLOSE_LOCK_KEY_PREFIX", prefix+"other:"), runArgs(param, "")...),
	}
	expired, closedByRuns, fenced := 0, 0, 0
	var per []string
	for _, c := range cs {
		require.Equal(t, 0, c.wait(t, 3*time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 10))
		n := strings.Count(c.stderr.String(), "ran out before commit")
		expired += n
		sum := parseSummary(c.stdout.String())
		require.True(t, sum.Found, c.name)
		closedByRuns += sum.Closed
		// Scanned orders neither closed nor skipped for a lock or payment
		// were found closed under the row lock: the fence held.
		f := sum.Scanned - sum.Closed - sum.SkippedPaid - sum.SkippedLocked - sum.DeadLettered
		fenced += f
		per = append(per, fmt.Sprintf("%s: closed %d, found closed %d, rolled back %d", c.name, sum.Closed, f, n))
	}
	l := requireNoHalfClose(t, db.DB, base, "after the slow runs")
	require.Equal(t, l.Closed, closedByRuns, "closes reported by the runs vs the database")
	require.Positive(t, strings.Count(slow.stderr.String(), "ran out before commit"), "the slow executor's transactions did not outlive their lease")
	require.Zero(t, parseSummary(slow.stdout.String()).Closed, "a close committed after its lease ran out")
	require.Positive(t, closedByRuns, "nobody took over the slow executor's orders")
	r.add("1.5 s close transactions vs a 1 s lease, 3 executors (%s); left %d", strings.Join(per, "; "), l.Lost)

	// The next run (no delay) closes whatever is left.
	c := h.runJob(t, "final", e, "", "")
	require.Equal(t, 0, c.code, c.stderr.String())
	l = measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
}
