package suggest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClosest(t *testing.T) {
	require.Equal(t, 1, editDistance("deadletters", "deadletter"))
	require.Equal(t, 1, editDistance("lsit", "list"))
	require.Equal(t, 3, editDistance("kitten", "sitting"))
	require.Empty(t, Closest("ab", []string{"run", "tasks"}), "too short to guess")
	require.Equal(t, "list", Closest("lsit", []string{"list", "show"}))
	require.Equal(t, "deadletter", Closest("dead", []string{"deadletter", "demo-data"}), "a prefix")
	require.Empty(t, Closest("provisions-all", []string{"provision"}))
}
