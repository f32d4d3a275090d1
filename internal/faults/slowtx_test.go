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

// Scenario 6: close transactions slower than the lock expiry. In each
// round the slow executor, whose every close outlives its 1 s lease, takes
// the first page of due orders. 1.15 s later, when its locks have expired
// but its transaction still holds the rows, two more go for the same page:
// one on the same lock keys (it gets the expired locks and waits for the
// rows), one on other lock keys (its locks exclude nobody, as after a Redis
// flush or failover: only the row locks and the status CAS stand between it
// and a second close). The slow transaction rolls back at its lease check;
// one of the others closes the page, the other finds it closed. The orders
// use many SKUs so that closes of different orders rarely share a stock row.
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

	const param = "pageSize=40,maxOrders=40" // one page per run
	expired, closed, fenced := 0, 0, 0
	for round := range h.p.slowRounds {
		slow := h.start(t, fmt.Sprintf("slow-%d", round), e.with("MYSQL_DSN", slowDSN), runArgs(param, "")...)
		time.Sleep(1150 * time.Millisecond)
		others := []*child{
			h.start(t, fmt.Sprintf("same-keys-%d", round), e, runArgs(param, "")...),
			h.start(t, fmt.Sprintf("other-keys-%d", round), e.with("ORDER_CLOSE_LOCK_KEY_PREFIX", prefix+"other:"), runArgs(param, "")...),
		}
		for _, c := range append(others, slow) {
			require.Equal(t, 0, c.wait(t, time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 10))
		}
		n := strings.Count(slow.stderr.String(), "ran out before commit")
		require.Positive(t, n, "round %d: the slow transaction did not outlive its lease", round)
		require.Zero(t, parseSummary(slow.stdout.String()).Closed, "round %d: a close committed after its lease ran out", round)
		expired += n
		roundClosed := 0
		for _, c := range others {
			sum := parseSummary(c.stdout.String())
			require.True(t, sum.Found, c.name)
			roundClosed += sum.Closed
			// Scanned orders neither closed nor skipped for a lock or a
			// payment were found closed under the row lock: the fence held.
			fenced += sum.Scanned - sum.Closed - sum.SkippedPaid - sum.SkippedLocked - sum.DeadLettered
			expired += strings.Count(c.stderr.String(), "ran out before commit")
		}
		require.Positive(t, roundClosed, "round %d: nobody took over the slow executor's page", round)
		closed += roundClosed
		l := requireNoHalfClose(t, db.DB, base, fmt.Sprintf("after round %d", round))
		require.Equal(t, closed, l.Closed, "closes reported by the runs vs the database")
	}
	r.add("%d rounds of a 1.5 s close vs a 1 s lease: %d transactions rolled back at the lease check (the slow ones closed nothing), the page taken over (%d closed), %d found already closed under the row lock",
		h.p.slowRounds, expired, closed, fenced)

	// The next run (no delay) closes the rest.
	c := h.runJob(t, "final", e, "", "")
	require.Equal(t, 0, c.code, c.stderr.String())
	l := measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
}
