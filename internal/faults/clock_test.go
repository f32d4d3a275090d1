package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// libfaketime finds libfaketime (Debian package faketime).
func libfaketime(t *testing.T) string {
	t.Helper()
	ms, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	ms = append(ms, "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")
	for _, m := range ms {
		if _, err := os.Stat(m); err == nil {
			return m
		}
	}
	t.Fatal("libfaketime not found: apt-get install -y faketime")
	return ""
}

// Scenario 7: the executor's clock far ahead of or behind the database's.
//
// How the offset is made: libfaketime cannot shift a Go program (the Go
// runtime reads the clock through the vDSO, not libc; checked: `faketime
// +2d` leaves time.Now of a static or a cgo Go binary unchanged), and the
// kernel's time namespaces shift only the monotonic and boot clocks. So the
// suite shifts the other side: its private mariadbd runs under libfaketime
// (FAKETIME=+3d, -3d, ...), a real clock shift of that process, while the
// executor keeps the machine's clock. What matters is the difference between
// the two clocks, and the suite checks it is there (UTC_TIMESTAMP() against
// the test's own clock) before it trusts the result.
//
// Orders get deadlines relative to the database clock: overdue by 90 s, due
// in a few seconds, due in an hour. The first run closes exactly the overdue
// ones (none early); once the second group falls due by the database clock,
// the next run closes them (none left late); the third group is untouched.
func scenarioClockSkew(t *testing.T, h *harness, r *report) {
	lib := libfaketime(t)
	var srv *mariadbtest.Server
	_, prefix := redistest.Client(t)
	for i, off := range h.p.clockOffsets {
		fenv := []string{"LD_PRELOAD=" + lib, "FAKETIME=" + off, "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_NO_CACHE=1"}
		if srv == nil {
			srv = mariadbtest.Start(t, mariadbtest.Options{Env: fenv})
		} else {
			srv.SetEnv(fenv)
			srv.Restart(false)
		}
		db, dsn := srv.NewDB(t, fmt.Sprintf("faults_clock_%d", i))
		skew := clockSkew(t, db)
		want := parseOffset(t, off)
		require.InDelta(t, want.Seconds(), skew.Seconds(), 10, "the database clock is not shifted by %s (skew %s)", off, skew)
		r.add("%s", clockCase(t, h, r, db, dsn, prefix, skew))
	}
}

func clockCase(t *testing.T, h *harness, r *report, db *sqlx.DB, dsn, prefix string, skew time.Duration) string {
	res := demo(t, db, 300, 7)
	require.Positive(t, res.Orders)
	// Deadlines relative to the database clock, by id: overdue, soon, later.
	for _, q := range []string{
		`UPDATE order_info SET create_time = NOW() - INTERVAL timeout_minutes MINUTE - INTERVAL 90 SECOND WHERE status = 0 AND id % 3 = 0`,
		`UPDATE order_info SET create_time = NOW() - INTERVAL timeout_minutes MINUTE + INTERVAL 4 SECOND WHERE status = 0 AND id % 3 = 1`,
		`UPDATE order_info SET create_time = NOW() - INTERVAL timeout_minutes MINUTE + INTERVAL 3600 SECOND WHERE status = 0 AND id % 3 = 2`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	group := func(mod, status int) int {
		var n int
		require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM order_info WHERE id % 3 = ? AND status = ?`, mod, status))
		return n
	}
	overdue, soon, later := group(0, 0), group(1, 0), group(2, 0)
	require.Positive(t, overdue*soon*later)
	base := snapshot(t, db)
	e := baseEnv(t, dsn, redistest.Addr(), prefix)

	var dueAt time.Time // the second group's deadline
	require.NoError(t, db.Get(&dueAt, `SELECT MAX(create_time + INTERVAL timeout_minutes MINUTE) FROM order_info WHERE status = 0 AND id % 3 = 1`))
	c := h.runJob(t, "clock-run-1", e, "", "")
	require.Equal(t, 0, c.code, c.stderr.String())
	require.Equal(t, overdue, group(0, 2), "overdue orders closed by the first run")
	require.Zero(t, group(2, 2), "orders closed an hour before their deadline")
	if dbNow(t, db).Before(dueAt) { // the run was over before they fell due
		require.Zero(t, group(1, 2), "orders closed before their deadline")
	}
	l := requireNoHalfClose(t, db, base, "after the first run")
	require.Zero(t, l.Early, "orders closed before their deadline")

	// Wait for the second group to fall due by the database clock.
	waitFor(t, 30*time.Second, func() bool { return !dbNow(t, db).Before(dueAt.Add(time.Second)) }, "database clock did not reach the deadline")
	asOf := dbNow(t, db)
	c = h.runJob(t, "clock-run-2", e, "", "")
	require.Equal(t, 0, c.code, c.stderr.String())
	require.Equal(t, soon, group(1, 2), "orders due by the database clock left open")
	require.Equal(t, later, group(2, 0), "orders an hour away closed")

	l = measure(t, db, base, asOf)
	r.final(l)
	requireClean(t, l)
	require.Equal(t, overdue+soon, l.Due)
	return fmt.Sprintf("executor clock %s the database's by %s: run 1 closed %d overdue and 0 of %d due 4 s later, run 2 closed those %d, %d due in an hour untouched (early=%d)",
		aheadBehind(skew), fmt.Sprintf("%.0fh", skew.Abs().Hours()), overdue, soon, soon, later, l.Early)
}

// clockSkew returns database clock minus the test's clock.
func clockSkew(t *testing.T, db *sqlx.DB) time.Duration {
	var dbUTC time.Time
	require.NoError(t, db.Get(&dbUTC, "SELECT UTC_TIMESTAMP(3)"))
	return dbUTC.Sub(time.Now().UTC())
}

func aheadBehind(dbMinusExec time.Duration) string {
	if dbMinusExec > 0 {
		return "behind"
	}
	return "ahead of"
}

// parseOffset reads libfaketime's "+3d" / "-400d" / "+5h".
func parseOffset(t *testing.T, s string) time.Duration {
	t.Helper()
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[s[len(s)-1]]
	require.NotZero(t, unit, "offset %q", s)
	var n int
	_, err := fmt.Sscanf(s[:len(s)-1], "%d", &n)
	require.NoError(t, err)
	return time.Duration(n) * unit
}
