package sqlexec_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/sqlexec"
)

func TestIntList(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", sqlexec.IntList(nil))
	require.Equal(t, "1,-2,30", sqlexec.IntList([]int64{1, -2, 30}))
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", sqlexec.Truncate("abc", 5))
	require.Equal(t, "ab...", sqlexec.Truncate("abcdefgh", 5))
	require.Equal(t, "订单...", sqlexec.Truncate("订单关闭失败原因", 5))
}
