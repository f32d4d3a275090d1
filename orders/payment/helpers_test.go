package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
)

// The tests stop a private Redis on purpose.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// testBundle is paytest's bundle (a Service and a Closer over one
// database and Redis): the payment side's tests race, follow or lose to
// closes.
type testBundle struct{ *paytest.Bundle }

func setup(t *testing.T, opts ...paytest.Option) *testBundle {
	t.Helper()
	return &testBundle{paytest.Setup(t, opts...)}
}

// lateCloser is a Closer over the bundle's database and locker for which
// the orders placed so far are age older (their create_time moved back):
// with age past their timeout, they are due. (Package orders' tests shift
// a Closer's clock instead, which only its own tests can.)
func (b *testBundle) lateCloser(t *testing.T, age time.Duration, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET create_time = create_time - INTERVAL ? MICROSECOND`, age.Microseconds())
	require.NoError(t, err)
	c, err := orders.NewCloser(b.DB.DB, b.Locker, cfg)
	require.NoError(t, err)
	return c
}

func (b *testBundle) stock(t *testing.T, sku int64) (available, locked int64) {
	t.Helper()
	var r struct {
		A int64 `db:"available"`
		L int64 `db:"locked"`
	}
	require.NoError(t, b.DB.GetContext(b.Ctx, &r, `SELECT available, locked FROM inventory WHERE sku_id = ?`, sku))
	return r.A, r.L
}
