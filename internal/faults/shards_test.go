package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scenario 5: two executors given the same shard (a misconfiguration), and
// the shard total changing between runs while the previous round still runs
// (an executor joins, then two leave). Every order is closed once, and the
// closes the processes report add up to the closes in the database.
func scenarioShards(t *testing.T, h *harness, r *report) {
	db, res, base, e := seeded(t, h.p.shardOrders, 5)

	// Paced so that rounds overlap; capped so that each round leaves work.
	rate := max(200, res.Due/4)
	capped := fmt.Sprintf("pageSize=50,maxPerSecond=%d,maxOrders=%d", rate, res.Due/6)
	rounds := []struct {
		name   string
		param  string
		shards []string
	}{
		{"total 2, shard 0 twice", capped, []string{"0/2", "0/2", "1/2"}},
		{"total 3 (one joined)", capped, []string{"0/3", "1/3", "2/3"}},
		{"total 1 (two left), twice", "pageSize=200", []string{"0/1", "0/1"}},
	}
	var all []*child
	var prev []*child
	for i, rd := range rounds {
		var cur []*child
		for j, sh := range rd.shards {
			cur = append(cur, h.start(t, fmt.Sprintf("round%d-%d-%s", i+1, j, sh), e, runArgs(rd.param, sh)...))
		}
		// The next round starts while this one still runs (the cron fires
		// again): only the last one is waited for.
		if i < len(rounds)-1 {
			time.Sleep(400 * time.Millisecond)
		}
		for _, c := range prev {
			require.Equal(t, 0, c.wait(t, 2*time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 10))
		}
		prev = cur
		all = append(all, cur...)
	}
	closedByRuns, overlapped := 0, 0
	for _, c := range prev {
		require.Equal(t, 0, c.wait(t, 2*time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 10))
	}
	for _, c := range all {
		sum := parseSummary(c.stdout.String())
		require.True(t, sum.Found, "%s: %s", c.name, tail(c.stdout.String(), 5))
		closedByRuns += sum.Closed
		overlapped += sum.SkippedLocked
	}
	l := measure(t, db.DB, base, time.Time{})
	r.add("%d processes in 3 overlapping rounds (2 on one shard; totals 2, 3, 1): reported closed %d, skipped as locked elsewhere %d", len(all), closedByRuns, overlapped)
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
	require.Equal(t, l.Closed, closedByRuns, "each close reported by exactly one process")
}
