package orders_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// testBundle is what most tests need: a fresh database, the shared Redis
// with a key prefix of the test's own, and the package's parts over them.
type testBundle struct {
	ctx    context.Context
	db     *dbtest.DB
	rdb    *redis.Client
	prefix string
	locker *orderlock.Locker
	closer *orders.Closer
	svc    *payment.Service
}

type setupOpts struct {
	lockerCfg orderlock.Config
	closerCfg orders.CloserConfig
}

func setup(t *testing.T, opts ...func(*setupOpts)) *testBundle {
	t.Helper()
	var o setupOpts
	for _, f := range opts {
		f(&o)
	}
	b := &testBundle{ctx: context.Background(), db: dbtest.New(t)}
	b.rdb, b.prefix = redistest.Client(t)
	cfg := o.lockerCfg
	if cfg.Client == nil && len(cfg.Nodes) == 0 {
		cfg.Client = b.rdb
	}
	if cfg.Prefix == "" {
		cfg.Prefix = b.prefix
	}
	var err error
	b.locker, err = orderlock.New(cfg)
	require.NoError(t, err)
	b.closer, err = orders.NewCloser(b.db.DB, b.locker, o.closerCfg)
	require.NoError(t, err)
	b.svc, err = payment.NewService(b.db.DB, b.locker, payment.ServiceConfig{})
	require.NoError(t, err)
	return b
}

func withCloser(cfg orders.CloserConfig) func(*setupOpts) {
	return func(o *setupOpts) { o.closerCfg = cfg }
}

func withLocker(cfg orderlock.Config) func(*setupOpts) {
	return func(o *setupOpts) { o.lockerCfg = cfg }
}

// seed generates demo data (few SKUs, so pages share stock rows) and takes
// the invariants' baseline.
func (b *testBundle) seed(t *testing.T, spec orderdemo.Spec) (orderdemo.Result, *ordertest.Baseline) {
	t.Helper()
	if spec.SKUs == 0 {
		spec.SKUs = 200
	}
	res, err := orderdemo.Generate(b.ctx, b.db.DB, spec)
	require.NoError(t, err)
	base, err := ordertest.Snapshot(b.ctx, b.db)
	require.NoError(t, err)
	return res, base
}

// build inserts exactly the orders given (ordertest.Order), for a test
// about those orders, and takes the invariants' baseline.
func (b *testBundle) build(t *testing.T, opts ...ordertest.OrderOpts) *ordertest.Baseline {
	t.Helper()
	for _, o := range opts {
		ordertest.Order(t, b.db.DB, o)
	}
	return snapshot(t, b)
}

// numbered describes n orders numbered prefix-0 to prefix-(n-1), each as
// opts says for its index.
func numbered(prefix string, n int, opts func(i int) ordertest.OrderOpts) []ordertest.OrderOpts {
	out := make([]ordertest.OrderOpts, n)
	for i := range out {
		out[i] = opts(i)
		out[i].OrderNo = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func (b *testBundle) check(t *testing.T, base *ordertest.Baseline) {
	t.Helper()
	require.NoError(t, ordertest.Check(b.ctx, b.db, base))
}

func (b *testBundle) counts(t *testing.T) ordertest.StatusCounts {
	t.Helper()
	return ordertest.CountsOf(t, b.db)
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return b.db.Count(t, query, args...)
}

// newCloser makes another Closer over the bundle's database and locker.
// ids runs query, which selects ids, and returns them.
func (b *testBundle) ids(t *testing.T, query string, args ...any) []int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, b.db.SelectContext(b.ctx, &ids, query, args...), query)
	return ids
}

func (b *testBundle) newCloser(t *testing.T, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	c, err := orders.NewCloser(b.db.DB, b.locker, cfg)
	require.NoError(t, err)
	return c
}

// shiftedCloser is newCloser whose runs read the database's clock shift
// later.
func (b *testBundle) shiftedCloser(t *testing.T, shift time.Duration, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	return orders.ShiftClock(b.newCloser(t, cfg), shift)
}

// redisKeys counts the test's keys in the shared Redis.
func (b *testBundle) redisKeys(t *testing.T) int {
	t.Helper()
	keys, err := b.rdb.Keys(b.ctx, b.prefix+"*").Result()
	require.NoError(t, err)
	return len(keys)
}

// run runs the bundle's closer and fails the test on an error.
func (b *testBundle) run(t *testing.T, opt orders.RunOptions) orders.RunStats {
	t.Helper()
	st, err := b.closer.Run(b.ctx, opt)
	require.NoError(t, err)
	return st
}

func snapshot(t *testing.T, b *testBundle) *ordertest.Baseline {
	t.Helper()
	base, err := ordertest.Snapshot(b.ctx, b.db)
	require.NoError(t, err)
	return base
}
