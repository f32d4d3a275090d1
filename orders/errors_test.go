package orders

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
)

// A failed compensation check is about the order's own data, so the close
// path dead-letters the order: dbserver knows it through OrderData.
func TestCompensationErrorIsAboutTheOrder(t *testing.T) {
	t.Parallel()
	require.Equal(t, dbserver.KindOrder, dbserver.KindOf(&CompensationError{OrderNo: "X", Reason: "r"}))
	require.Equal(t, dbserver.KindOrder, dbserver.KindOf(fmt.Errorf("tx: %w", &CompensationError{Reason: "r"})))
	require.False(t, dbserver.NotNow(&CompensationError{OrderNo: "X", Reason: "r"}))
	require.True(t, dbserver.ServerUnknown.SplitPage(&CompensationError{Reason: "r"}))
}
