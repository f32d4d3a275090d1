package shard_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/shard"
)

// Every unit is covered exactly once: by one executor whole, or by every
// executor with its own row shard; and every executor gets the same
// amount of work in units (whole ones plus 1/total of each split one).
func TestAssignCoversEveryUnitOnceAndEvenly(t *testing.T) {
	t.Parallel()
	for units := 0; units <= 20; units++ {
		for total := 1; total <= 9; total++ {
			whole := make([]int, units)         // executors taking the unit whole
			rows := make([]map[int]bool, units) // row indexes taken of a split unit
			work := make([]float64, total)
			for i := range total {
				for _, s := range shard.Assign(units, i, total) {
					if s.Whole() {
						whole[s.Unit]++
						work[i]++
						continue
					}
					require.Equal(t, total, s.RowTotal)
					require.Equal(t, i, s.RowIndex)
					if rows[s.Unit] == nil {
						rows[s.Unit] = map[int]bool{}
					}
					rows[s.Unit][s.RowIndex] = true
					work[i] += 1 / float64(s.RowTotal)
				}
			}
			for u := range units {
				switch whole[u] {
				case 1:
					require.Empty(t, rows[u], "units=%d total=%d: unit %d both whole and split", units, total, u)
				case 0:
					require.Len(t, rows[u], total, "units=%d total=%d: unit %d not covered by every row shard", units, total, u)
				default:
					t.Fatalf("units=%d total=%d: unit %d taken whole %d times", units, total, u, whole[u])
				}
			}
			for i := range total {
				require.InDelta(t, float64(units)/float64(total), work[i], 1e-9, "units=%d total=%d executor %d", units, total, i)
			}
		}
	}
}

// Whole units go round the executors in turn, so the units of one source
// (listed together) spread over the executors.
func TestAssignWholeUnitsInTurn(t *testing.T) {
	t.Parallel()
	require.Equal(t, []shard.Share{{Unit: 0, RowTotal: 1}, {Unit: 2, RowTotal: 1}, {Unit: 4, RowTotal: 1}},
		shard.Assign(6, 0, 2))
	require.Equal(t, []shard.Share{{Unit: 1, RowTotal: 1}, {Unit: 4, RowIndex: 1, RowTotal: 4}, {Unit: 5, RowIndex: 1, RowTotal: 4}},
		shard.Assign(6, 1, 4))
	require.Equal(t, []shard.Share{{Unit: 0, RowIndex: 2, RowTotal: 3}, {Unit: 1, RowIndex: 2, RowTotal: 3}},
		shard.Assign(2, 2, 3))
	require.Nil(t, shard.Assign(3, 3, 3), "an index outside the executors takes nothing")
	require.Equal(t, []shard.Share{{Unit: 0, RowTotal: 1}}, shard.Assign(1, 0, 0), "no broadcast: the whole unit")
}

// With rows: units of equal size holding odd-only ids (a Galera node's),
// split over 1..5 executors, give each executor the same number of rows
// within 10%, whatever the counts.
func TestAssignBalancesRows(t *testing.T) {
	t.Parallel()
	const perUnit = 6000
	for _, units := range []int{1, 2, 3, 5, 6, 8} {
		for total := 1; total <= 5; total++ {
			t.Run(fmt.Sprintf("%d units %d executors", units, total), func(t *testing.T) {
				counts := make([]int, total)
				for i := range total {
					for _, s := range shard.Assign(units, i, total) {
						for n := range perUnit {
							id := int64(s.Unit*10_000_000 + 2*n + 1)
							if shard.Of(id, s.RowTotal) == s.RowIndex {
								counts[i]++
							}
						}
					}
				}
				sum, most := 0, 0
				for _, c := range counts {
					sum += c
					most = max(most, c)
				}
				require.Equal(t, units*perUnit, sum, "every row exactly once")
				mean := float64(sum) / float64(total)
				require.LessOrEqual(t, float64(most)/mean, 1.10, "counts %v", counts)
			})
		}
	}
}
