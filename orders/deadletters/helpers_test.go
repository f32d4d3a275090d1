package deadletters_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/internal/dbtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBundle is a fresh database and the context the tests run in.
type testBundle struct {
	ctx context.Context
	db  *dbtest.DB
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{ctx: context.Background(), db: dbtest.New(t)}
}

// statusOf reads the status of orderNo's close letter straight from the
// table.
func (b *testBundle) statusOf(t *testing.T, orderNo string) string {
	t.Helper()
	var s string
	require.NoError(t, b.db.GetContext(b.ctx, &s, `SELECT status FROM order_dead_letter WHERE order_no = ? AND stage = 'close'`, orderNo))
	return s
}
