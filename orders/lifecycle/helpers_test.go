package lifecycle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// testBundle is a fresh database and a Closer over it: the tests' worlds
// hold closed orders as well, closed the way the executor closes them.
type testBundle struct {
	ctx    context.Context
	db     *dbtest.DB
	closer *orders.Closer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{ctx: context.Background(), db: dbtest.New(t)}
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	b.closer, err = orders.NewCloser(b.db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)
	return b
}

// seed generates demo data.
func (b *testBundle) seed(t *testing.T, spec orderdemo.Spec) {
	t.Helper()
	_, err := orderdemo.Generate(b.ctx, b.db.DB, spec)
	require.NoError(t, err)
}

// run runs the bundle's closer and fails the test on an error.
func (b *testBundle) run(t *testing.T, opt orders.RunOptions) {
	t.Helper()
	_, err := b.closer.Run(b.ctx, opt)
	require.NoError(t, err)
}

func (b *testBundle) check(t *testing.T, base *ordertest.Baseline) {
	t.Helper()
	require.NoError(t, ordertest.Check(b.ctx, b.db, base))
}

func snapshot(t *testing.T, b *testBundle) *ordertest.Baseline {
	t.Helper()
	base, err := ordertest.Snapshot(b.ctx, b.db)
	require.NoError(t, err)
	return base
}
