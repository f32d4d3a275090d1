package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// The tests stop a private Redis on purpose.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// testBundle is a fresh database, the shared Redis with a key prefix of
// the test's own, a Service and a Closer over them: the payment side's
// tests race, follow or lose to closes.
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
	if cfg.Client == nil {
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

// shop stocks SKUs 1-5 (paytest.Shop).
func (b *testBundle) shop(t *testing.T) { paytest.Shop(t, b.svc) }

// place places an order through the service (paytest.Place).
func (b *testBundle) place(t *testing.T, no string, coupon bool, items ...payment.Item) {
	paytest.Place(t, b.svc, no, coupon, items...)
}

// lateCloser is a Closer over the bundle's database and locker for which
// the orders placed so far are age older (their create_time moved back):
// with age past their timeout, they are due. (Package orders' tests shift
// a Closer's clock instead, which only its own tests can.)
func (b *testBundle) lateCloser(t *testing.T, age time.Duration, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	_, err := b.db.ExecContext(b.ctx, `UPDATE order_info SET create_time = create_time - INTERVAL ? MICROSECOND`, age.Microseconds())
	require.NoError(t, err)
	c, err := orders.NewCloser(b.db.DB, b.locker, cfg)
	require.NoError(t, err)
	return c
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
	return res, snapshot(t, b)
}

func (b *testBundle) stock(t *testing.T, sku int64) (available, locked int64) {
	t.Helper()
	var r struct {
		A int64 `db:"available"`
		L int64 `db:"locked"`
	}
	require.NoError(t, b.db.GetContext(b.ctx, &r, `SELECT available, locked FROM inventory WHERE sku_id = ?`, sku))
	return r.A, r.L
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

// redisKeys counts the test's keys in the shared Redis.
func (b *testBundle) redisKeys(t *testing.T) int {
	t.Helper()
	keys, err := b.rdb.Keys(b.ctx, b.prefix+"*").Result()
	require.NoError(t, err)
	return len(keys)
}

func snapshot(t *testing.T, b *testBundle) *ordertest.Baseline {
	t.Helper()
	base, err := ordertest.Snapshot(b.ctx, b.db)
	require.NoError(t, err)
	return base
}
