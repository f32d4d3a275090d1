package shard_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/internal/sqlexec"
)

// idShapes are the id sequences a shop's order table may hold: every one
// must split evenly. n ids each.
func idShapes(n int) map[string][]int64 {
	rng := rand.New(rand.NewPCG(27, 4))
	step := func(first, by int64) []int64 {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = first + int64(i)*by
		}
		return ids
	}
	// snowflake: timestamp<<22 | worker<<12 | sequence, written at a low
	// rate: a few ms apart, sequence almost always 0, a few workers.
	snowflake := make([]int64, n)
	ts := int64(1_764_000_000_000)
	for i := range snowflake {
		ts += 1 + rng.Int64N(40)
		seq := int64(0)
		if rng.IntN(20) == 0 {
			seq = 1
		}
		snowflake[i] = ts<<22 | rng.Int64N(3)<<12 | seq
	}
	gaps := make([]int64, n)
	id := int64(0)
	for i := range gaps {
		id += 1 + rng.Int64N(9)
		gaps[i] = id
	}
	return map[string][]int64{
		"sequential": step(1, 1), "odd only": step(1, 2), "even only": step(2, 2), "step 3": step(3, 3),
		"step 4 from 2": step(2, 4), "step 1000": step(1000, 1000), "gaps": gaps, "snowflake": snowflake,
	}
}

// Each shape splits within ±10% of the mean over 2, 3, 4 and 5 shards, in
// Go (the server's agreement is TestMatchAgreesWithOf).
func TestOfBalances(t *testing.T) {
	t.Parallel()
	for name, ids := range idShapes(3000) {
		for total := 2; total <= 5; total++ {
			counts := make([]int, total)
			for _, id := range ids {
				s := shard.Of(id, total)
				require.True(t, s >= 0 && s < total, "%s: id %d in shard %d of %d", name, id, s, total)
				counts[s]++
			}
			mean := float64(len(ids)) / float64(total)
			for s, c := range counts {
				require.InDelta(t, mean, float64(c), mean*0.10, "%s, %d shards: shard %d has %d of %d (counts %v)", name, total, s, c, len(ids), counts)
			}
		}
	}
}

// What id % total did to Galera's ids: the test above would fail with it.
func TestModuloDoesNotBalanceOddIDs(t *testing.T) {
	t.Parallel()
	counts := make([]int, 2)
	for _, id := range idShapes(100)["odd only"] {
		counts[id%2]++
	}
	require.Equal(t, []int{0, 100}, counts)
}

func TestOfSingleShard(t *testing.T) {
	t.Parallel()
	for _, id := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64} {
		require.Zero(t, shard.Of(id, 1))
		require.Zero(t, shard.Of(id, 0))
	}
}

// Match, evaluated by the server, puts every id in the shard Of puts it
// in: the shapes above, extremes (negative ids, the largest BIGINT, which
// must not overflow) and random 64-bit ids, for 1 to 9 shards and a large
// total.
func TestMatchAgreesWithOf(t *testing.T) {
	t.Parallel()
	db := dbtest.NewEmpty(t)
	ctx := context.Background()
	ids := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 32, -1, 0, 1, 1 << 32, 1<<32 - 1, math.MaxInt64 - 1, math.MaxInt64}
	for _, shape := range idShapes(1000) {
		ids = append(ids, shape...)
	}
	rng := rand.New(rand.NewPCG(28, 5))
	for range 2000 {
		ids = append(ids, int64(rng.Uint64()))
	}
	_, err := db.ExecContext(ctx, "CREATE TABLE ids (id BIGINT NOT NULL PRIMARY KEY)")
	require.NoError(t, err)
	for i := 0; i < len(ids); i += 1000 {
		_, err := db.ExecContext(ctx, "INSERT IGNORE INTO ids (id) VALUES ("+joinValues(ids[i:min(i+1000, len(ids))])+")")
		require.NoError(t, err)
	}
	var stored int
	require.NoError(t, db.GetContext(ctx, &stored, "SELECT COUNT(*) FROM ids"))
	distinct := map[int64]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	require.Equal(t, len(distinct), stored)
	for _, total := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 1000, math.MaxInt32} {
		seen := 0
		for index := range min(total, 9) {
			var got []int64
			err := sqlexec.SelectNamed(ctx, db, &got, "SELECT id FROM ids WHERE "+shard.Match("id")+" ORDER BY id",
				map[string]any{"shard_total": total, "shard_index": index})
			require.NoError(t, err, "total %d index %d", total, index)
			for _, id := range got {
				require.Equal(t, index, shard.Of(id, total), "id %d, total %d: the server says shard %d", id, total, index)
			}
			seen += len(got)
		}
		if total <= 9 {
			require.Equal(t, stored, seen, "total %d: every id in exactly one shard", total)
		}
	}
}

// joinValues renders ids as the rows of a VALUES list: 1),(2),(3.
func joinValues(ids []int64) string { return strings.ReplaceAll(sqlexec.IntList(ids), ",", "),(") }
