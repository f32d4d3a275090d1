package orders_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
)

// sweepTables is how many order tables each database of a sweep test
// splits its orders over.
const sweepTables = 1

// unitConfig is the CloserConfig of the unit table of source.
func unitConfig(t *testing.T, source, table string) orders.CloserConfig {
	t.Helper()
	require.Equal(t, "order_info", table)
	return orders.CloserConfig{SourceName: source}
}
