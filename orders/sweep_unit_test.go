package orders_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/schema"
)

// sweepTables is how many order tables each database of a sweep test
// splits its orders over.
const sweepTables = 3

// unitConfig is the CloserConfig of the unit table of source: the
// executor's schema on that table, its lines in the item table of the
// same suffix.
func unitConfig(t *testing.T, source, table string) orders.CloserConfig {
	t.Helper()
	sch, err := schema.Default().ForTable(table)
	require.NoError(t, err)
	return orders.CloserConfig{SourceName: source, Schema: sch}
}
