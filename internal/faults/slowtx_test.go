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
// COMMIT. Once per transaction (the rows of one close share closed_at), on
// each database connection in turn: the 1st, 4th, 7th ... close sleeps
// 1.2 s (past a 1 s lease), the 2nd, 5th ... 0.5 s (slow, but in time for
// the commit while others wait for its rows), the rest not at all.
// fault_ctl.slow = 0 turns it off.
var slowCloseSQL = []string{
	`CREATE TABLE fault_ctl (id INT PRIMARY KEY, slow INT NOT NULL)`,
	`INSERT INTO fault_ctl VALUES (1, 0)`,
	`CREATE TRIGGER fault_slow_close BEFORE INSERT ON order_close_log FOR EACH ROW
BEGIN
  DECLARE on_ INT DEFAULT 0;
  IF NOT (NEW.closed_at <=> @fault_closed_at) THEN
    SET @fault_closed_at = NEW.closed_at;
    SELECT slow INTO on_ FROM fault_ctl WHERE id = 1;
    IF on_ > 0 THEN
      SET @fault_n = COALESCE(@fault_n, 0) + 1;
      IF @fault_n % 3 = 1 THEN
        DO SLEEP(1.2);
      ELSEIF @fault_n % 3 = 2 THEN
        DO SLEEP(0.5);
      END IF;
    END IF;
  END IF;
END`,
}

// Scenario 6: close transactions made slower than the lock expiry by an
// injected delay, with three executors on the same orders: two share the
// lock keys (after expiry one takes over the other's orders while its
// transaction still runs), the third uses other keys (its locks exclude
// nobody, as after a Redis flush or failover), so only the row locks and the
// status CAS stand between it and a second close. A transaction that
// outlives its lease rolls back; every order is closed once.
func scenarioSlowTx(t *testing.T, h *harness, r *report) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	res := demo(t, db.DB, h.p.slowOrders, 6)
	for _, q := range slowCloseSQL {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	base := snapshot(t, db.DB)
	// Lease 1 s (the shortest allowed; minus drift and the 200 ms commit
	// margin: about 790 ms to commit in), against the delays above.
	e := baseEnv(t, db.DSN, redistest.Addr(), prefix).with("ORDER_CLOSE_LOCK_TTL", "1s")
	_, err := db.Exec(`UPDATE fault_ctl SET slow = 1`)
	require.NoError(t, err)

	const param = "pageSize=25"
	cs := []*child{
		h.start(t, "slow-A", e, runArgs(param, "")...),
		h.start(t, "slow-B", e, runArgs(param, "")...),
		h.start(t, "slow-C-other-keys", e.with("ORDER_CLOSE_LOCK_KEY_PREFIX", prefix+"other:"), runArgs(param, "")...),
	}
	expired, closedByRuns, fenced := 0, 0, 0
	var per []string
	for _, c := range cs {
		require.Equal(t, 0, c.wait(t, 3*time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 10))
		expired += strings.Count(c.stderr.String(), "ran out before commit")
		sum := parseSummary(c.stdout.String())
		require.True(t, sum.Found, c.name)
		closedByRuns += sum.Closed
		// Scanned orders neither closed nor skipped for a lock or payment
		// were found closed under the row lock: the fence held.
		f := sum.Scanned - sum.Closed - sum.SkippedPaid - sum.SkippedLocked - sum.DeadLettered
		fenced += f
		per = append(per, fmt.Sprintf("%s closed %d, found closed %d", strings.TrimPrefix(c.name, "slow-"), sum.Closed, f))
	}
	l := requireNoHalfClose(t, db.DB, base, "after the slow runs")
	require.Equal(t, l.Closed, closedByRuns, "closes reported by the runs vs the database")
	require.Positive(t, expired, "no transaction outlived its lease: the fault did not happen")
	r.add("3 executors (one on other lock keys), close transactions of 1.2 s and 0.5 s vs a 1 s lease: %d lease-expired rollbacks, %d orders found already closed under the row lock (%s); left %d",
		expired, fenced, strings.Join(per, ", "), l.Lost)

	// The delay is gone: the next run closes what was rolled back.
	_, err = db.Exec(`UPDATE fault_ctl SET slow = 0`)
	require.NoError(t, err)
	c := h.runJob(t, "final", e, "", "")
	require.Equal(t, 0, c.code, c.stderr.String())
	l = measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
}
