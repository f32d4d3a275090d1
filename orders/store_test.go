package orders

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	deadlock := fmt.Errorf("close: %w", &mysql.MySQLError{Number: 1213})
	timeout := &mysql.MySQLError{Number: 1205}
	dup := &mysql.MySQLError{Number: 1062}
	require.True(t, retryable(deadlock))
	require.True(t, retryable(timeout))
	require.False(t, retryable(dup))
	require.True(t, statementError(dup))
	require.True(t, statementError(&CompensationError{OrderNo: "X", Reason: "r"}))
	require.False(t, statementError(errors.New("driver: bad connection")))
	// The server going away or refusing writes is not an order's fault: no
	// dead letter, the next pass retries.
	for _, n := range []uint16{1053, 1927, 1290, 1040, 1969} {
		require.False(t, statementError(fmt.Errorf("commit: %w", &mysql.MySQLError{Number: n})), n)
	}
}

func TestDeltaCase(t *testing.T) {
	t.Parallel()
	d := []skuDelta{{1, 2}, {3, 1}, {5, 2}, {9, 7}}
	require.Equal(t, "CASE WHEN sku_id IN (3) THEN 1 WHEN sku_id IN (1,5) THEN 2 WHEN sku_id IN (9) THEN 7 END", deltaCase(d))
	require.Equal(t, "1,3,5,9", deltaSKUs(d))
	require.Equal(t, "", intList(nil))
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", truncate("abc", 5))
	require.Equal(t, "ab...", truncate("abcdefgh", 5))
	require.Equal(t, "订单...", truncate("订单关闭失败原因", 5))
}
