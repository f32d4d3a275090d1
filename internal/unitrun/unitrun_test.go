package unitrun_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/unitrun"
)

// A source whose first unit says its database is gone has its other units
// failed without a try, and the other source runs all of its own; the
// done callbacks see every unit once.
func TestDownSourceFailsItsUnitsOnly(t *testing.T) {
	units := []unitrun.Unit{{"a", "t_0"}, {"a", "t_1"}, {"b", "t_0"}, {"b", "t_1"}}
	sw := unitrun.New[int](units, 0, 1)
	require.Equal(t, 2, sw.Sources)
	gone := errors.New("dial tcp: connection refused")
	var done []string
	sw.Do(context.Background(), func(_ context.Context, u *unitrun.Run[int]) (int, error) {
		if u.Source == "a" {
			return 0, gone
		}
		return 7, nil
	}, func(u *unitrun.Run[int]) bool { return errors.Is(u.Err, gone) },
		func(u unitrun.Run[int]) { done = append(done, u.Name()) })
	require.ElementsMatch(t, []string{"a/t_0", "a/t_1", "b/t_0", "b/t_1"}, done)
	require.True(t, sw.Runs[0].Started)
	require.False(t, sw.Runs[1].Started)
	require.EqualError(t, sw.Runs[1].Err, "not started: source a cannot be reached: dial tcp: connection refused")
	require.Equal(t, 7, sw.Runs[3].Stats)
	require.EqualError(t, unitrun.Err(sw.Runs), "2 of 4 units failed, first a/t_0: dial tcp: connection refused")
}

// Executor 1 of 3 over 4 units takes unit 1 whole and a third of the rows
// of unit 3 (shard.Assign).
func TestNewTakesTheExecutorsShare(t *testing.T) {
	units := []unitrun.Unit{{"a", "t_0"}, {"a", "t_1"}, {"b", "t_0"}, {"b", "t_1"}}
	sw := unitrun.New[int](units, 1, 3)
	require.Len(t, sw.Runs, 2)
	require.Equal(t, "a/t_1", sw.Runs[0].Name())
	require.True(t, sw.Runs[0].Share.Whole())
	require.Equal(t, "b/t_1", sw.Runs[1].Name())
	require.Equal(t, 1, sw.Runs[1].Share.RowIndex)
	require.Equal(t, 2, sw.Sources)
}
