package keyset

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPick(t *testing.T) {
	t.Parallel()
	all := func(n int) []bool {
		h := make([]bool, n)
		for i := range h {
			h[i] = true
		}
		return h
	}
	for _, tc := range []struct {
		name          string
		hits          []bool
		limit, window int
		picked        []int
		next          int
		full          bool
	}{
		{"no filter, more rows", all(4), 3, 4, []int{0, 1, 2}, 2, false},
		{"no filter, exactly a page", all(3), 3, 4, []int{0, 1, 2}, -1, false},
		{"no filter, short page", all(2), 3, 4, []int{0, 1}, -1, false},
		{"empty", nil, 3, 4, nil, -1, false},
		{"filter fills the page early", []bool{false, true, true, false, true}, 2, 5, []int{1, 2}, 2, false},
		{"filter, window full, page short", []bool{false, true, false, false}, 2, 4, []int{1}, 3, true},
		{"filter, range ends", []bool{false, true, false}, 2, 4, []int{1}, -1, false},
		{"filter, last row of a full window fills the page", []bool{false, false, true, true}, 2, 4, []int{2, 3}, 3, false},
		{"filter, nothing in a full window", []bool{false, false}, 2, 2, nil, 1, true},
	} {
		picked, next, full := Pick(tc.hits, tc.limit, tc.window)
		require.Equal(t, tc.picked, picked, tc.name)
		require.Equal(t, tc.next, next, tc.name)
		require.Equal(t, tc.full, full, tc.name)
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	for _, c := range []Cursor{{}, {ID: 7}, {At: time.Date(2026, 12, 1, 10, 30, 0, 123e6, time.UTC), ID: 42}} {
		back, err := ParseCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c, back)
	}
	for _, bad := range []string{"x", "0", "-1", "2026~1", "20261201103000.123~", "~5"} {
		_, err := ParseCursor(bad)
		require.Error(t, err, bad)
	}
}

func TestCursorBefore(t *testing.T) {
	t.Parallel()
	end := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	at := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	require.Equal(t, int64(math.MaxInt64), Cursor{}.BeforeID(), "the start: past every id")
	require.Equal(t, int64(7), Cursor{ID: 7}.BeforeID())
	gotAt, gotID := Cursor{}.Before(end)
	require.Equal(t, end, gotAt)
	require.Equal(t, int64(math.MaxInt64), gotID)
	gotAt, gotID = Cursor{At: at, ID: 42}.Before(end)
	require.Equal(t, at, gotAt)
	require.Equal(t, int64(42), gotID)
}
