package faults_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// Scenario 2: the suite's private MariaDB is restarted (alternately crashed
// with SIGKILL and shut down cleanly) while a run works. The run fails
// cleanly (exit 1 with a message) or resumes; it never hangs; nothing is
// half-done; no order is dead-lettered for it; the next run finishes the
// work.
func scenarioMariaDBRestart(t *testing.T, h *harness, r *report) {
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	db, dsn := srv.NewDB(t, "faults_restart")
	_, prefix := redistest.Client(t)
	res := demo(t, db, 3000, 2)
	base := snapshot(t, db)
	e := baseEnv(t, dsn, redistest.Addr(), prefix)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))

	// Each run would take about 1.5 s per restart's worth of orders.
	rate := max(100, res.Due/(h.p.restarts+1)*2/3)
	param := fmt.Sprintf("pageSize=100,maxPerSecond=%d", rate)
	failedRuns, resumed, crashes := 0, 0, 0
	for i := range h.p.restarts {
		c := h.start(t, fmt.Sprintf("run-%d", i), e, runArgs(param, "")...)
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond))))
		crash := i%2 == 0
		if crash {
			crashes++
		}
		srv.Restart(crash)
		code := c.wait(t, 90*time.Second)
		switch code {
		case 0:
			resumed++
		case 1:
			failedRuns++
			require.Contains(t, c.stderr.String(), "ended with code", "a failed run says why")
			if failedRuns == 1 {
				r.add("first failure: %q", firstLineWith(c.stderr.String(), "ended with code"))
			}
		default:
			t.Fatalf("run %d exit code %d (want 0 or 1); stderr:\n%s", i, code, tail(c.stderr.String(), 20))
		}
		requireNoHalfClose(t, db, base, fmt.Sprintf("after restart %d", i+1))
		var dead int
		require.NoError(t, db.Get(&dead, "SELECT COUNT(*) FROM order_dead_letter"))
		require.Zero(t, dead, "orders dead-lettered because the database restarted (run %d); last errors: %s", i, deadLetterErrors(t, db))
	}
	r.add("restarts=%d (crashes %d): runs failed cleanly=%d resumed=%d", h.p.restarts, crashes, failedRuns, resumed)

	c := h.runJob(t, "final", e, "pageSize=500", "")
	require.Equal(t, 0, c.code, "the next run after the restarts; stderr:\n%s", tail(c.stderr.String(), 20))
	l := measure(t, db, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
}

func deadLetterErrors(t *testing.T, db interface {
	Select(dest any, query string, args ...any) error
}) string {
	var errs []string
	_ = db.Select(&errs, "SELECT DISTINCT LEFT(last_error, 200) FROM order_dead_letter LIMIT 5")
	return strings.Join(errs, " | ")
}

// firstLineWith returns the first line of s containing sub, cut to 160 bytes.
func firstLineWith(s, sub string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			if len(line) > 160 {
				line = line[:160] + "..."
			}
			return line
		}
	}
	return ""
}
