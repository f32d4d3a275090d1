package faults_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scenario 1: `kill -9` of an executor mid-run, many times at random points,
// then a rerun. After every kill the invariants hold (a close is one
// transaction: a killed one leaves nothing behind); the rerun closes what is
// left; every due order is closed and compensated once.
func scenarioKill9(t *testing.T, h *harness, r *report) {
	db, res, base, e := seeded(t, h.p.killOrders, 1)

	// Pace the run so that the kills land while it works and the due orders
	// outlast them all: closing them takes as long as every kill landing at
	// the end of its window, twice the time the kills take on average. (At
	// 0.7 of that, eight uniform waits outlasted it about once in 40 suites,
	// and the rerun found nothing left.)
	const window = 900 * time.Millisecond
	rate := max(100, int(float64(res.Due)/(float64(h.p.kills)*window.Seconds())))
	param := fmt.Sprintf("pageSize=100,maxPerSecond=%d", rate)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))

	midRun, before := 0, 0
	for i := range h.p.kills {
		c := h.start(t, fmt.Sprintf("kill-%d", i), e, runArgs(param, "")...)
		time.Sleep(time.Duration(rng.Int64N(int64(window))))
		exitedFirst := c.exited()
		c.kill9()
		l := requireNoHalfClose(t, db.DB, base, fmt.Sprintf("after kill %d", i+1))
		if !exitedFirst && l.Closed > before && l.Lost > 0 {
			midRun++ // it had closed some and left some: a kill in the middle
		}
		before = l.Closed
	}
	r.add("kills=%d (mid-run %d, rate %d/s)", h.p.kills, midRun, rate)
	require.Positive(t, midRun, "no kill landed in the middle of a run")
	l := measure(t, db.DB, base, time.Time{})
	require.Positive(t, l.Lost, "the kills left nothing for the rerun: slow the runs down")
	r.add("left after kills=%d", l.Lost)

	// Locks of the killed processes expire after the TTL; then one rerun
	// closes everything that is left.
	time.Sleep(2100 * time.Millisecond)
	c := h.runJob(t, "rerun", e, "pageSize=200", "")
	require.Equal(t, 0, c.code, "rerun exit code; stderr:\n%s", c.stderr.String())
	sum := parseSummary(c.stdout.String())
	require.True(t, sum.Found, c.stdout.String())
	require.Zero(t, sum.SkippedLocked, "rerun found orders still locked")
	require.Equal(t, l.Lost, sum.Closed, "the rerun closed exactly what the kills left")

	l = measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due, "due orders")
}
