package schema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A time unit reads by its name, and converts an instant to whole seconds
// or milliseconds rounded down, before 1970 too: an integer column holds
// a time at or before t exactly when it holds at most Of(t).
func TestTimeUnit(t *testing.T) {
	t.Parallel()
	for i, name := range TimeUnits {
		u, ok := ParseTimeUnit(name)
		require.True(t, ok, name)
		require.Equal(t, TimeUnit(i), u)
		require.Equal(t, name, u.String())
	}
	_, ok := ParseTimeUnit("epochmillis")
	require.False(t, ok, "names are exact")
	at := time.Date(2026, 10, 25, 0, 30, 0, 999_999_999, time.UTC)
	require.Equal(t, at.Unix(), EpochSeconds.Of(at))
	require.Equal(t, at.Unix()*1000+999, EpochMillis.Of(at))
	before := time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC)
	require.Equal(t, int64(-1), EpochSeconds.Of(before))
	require.Equal(t, int64(-500), EpochMillis.Of(before))
	require.Equal(t, int64(1000), EpochMillis.PerSecond())
	require.False(t, DateTime.Epoch())
}
