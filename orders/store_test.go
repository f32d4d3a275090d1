package orders

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeltaCase(t *testing.T) {
	t.Parallel()
	d := []skuDelta{{1, 2}, {3, 1}, {5, 2}, {9, 7}}
	require.Equal(t, "CASE WHEN sku_id IN (3) THEN 1 WHEN sku_id IN (1,5) THEN 2 WHEN sku_id IN (9) THEN 7 END", deltaCase(d))
	require.Equal(t, "1,3,5,9", deltaSKUs(d))
}
