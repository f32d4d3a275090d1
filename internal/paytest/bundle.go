package paytest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/jmoiron/sqlx"
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

// Bundle is what the tests of packages orders and payment start from: a
// fresh database, the shared Redis with a key prefix of the test's own,
// and a Locker, a Closer and a Service over them. Both packages' tests race
// closes against the payment side, so they build the same parts.
type Bundle struct {
	Ctx    context.Context
	DB     *dbtest.DB
	RDB    *redis.Client
	Prefix string
	Locker *orderlock.Locker
	Closer *orders.Closer
	Svc    *payment.Service
}

// Options configure Setup: a zero Locker config gets the test's Redis
// client (unless it names Nodes) and key prefix.
type Options struct {
	Locker orderlock.Config
	Closer orders.CloserConfig
	DB     *dbtest.DB // nil: a fresh database on the shared server
}

// Option changes Options.
type Option func(*Options)

// WithCloser makes the bundle's Closer with cfg.
func WithCloser(cfg orders.CloserConfig) Option {
	return func(o *Options) { o.Closer = cfg }
}

// WithLocker makes the bundle's Locker with cfg.
func WithLocker(cfg orderlock.Config) Option {
	return func(o *Options) { o.Locker = cfg }
}

// WithDB builds the bundle on db (a database of a private server, say)
// instead of a fresh one on the shared server.
func WithDB(db *dbtest.DB) Option {
	return func(o *Options) { o.DB = db }
}

// Setup builds a Bundle.
func Setup(t testing.TB, opts ...Option) *Bundle {
	t.Helper()
	var o Options
	for _, f := range opts {
		f(&o)
	}
	if o.DB == nil {
		o.DB = dbtest.New(t)
	}
	b := &Bundle{Ctx: context.Background(), DB: o.DB}
	b.RDB, b.Prefix = redistest.Client(t)
	cfg := o.Locker
	if cfg.Client == nil && len(cfg.Nodes) == 0 {
		cfg.Client = b.RDB
	}
	if cfg.Prefix == "" {
		cfg.Prefix = b.Prefix
	}
	var err error
	b.Locker, err = orderlock.New(cfg)
	require.NoError(t, err)
	b.Closer, err = orders.NewCloser(b.DB.DB, b.Locker, o.Closer)
	require.NoError(t, err)
	b.Svc, err = payment.NewService(b.DB.DB, b.Locker, payment.ServiceConfig{})
	require.NoError(t, err)
	return b
}

// Unconnected is a database handle and a Locker on servers nothing listens
// for: the constructors given them check their settings without
// connecting.
func Unconnected(t testing.TB) (*sqlx.DB, *orderlock.Locker) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	locker, err := orderlock.New(orderlock.Config{Client: rdb})
	require.NoError(t, err)
	return dbtest.Unconnected(t), locker
}

// Seed generates demo data (few SKUs, so pages share stock rows) and takes
// the invariants' baseline.
func (b *Bundle) Seed(t testing.TB, spec orderdemo.Spec) (orderdemo.Result, *ordertest.Baseline) {
	t.Helper()
	if spec.SKUs == 0 {
		spec.SKUs = 200
	}
	res, err := orderdemo.Generate(b.Ctx, b.DB.DB, spec)
	require.NoError(t, err)
	return res, b.Snapshot(t)
}

// Snapshot takes the invariants' baseline.
func (b *Bundle) Snapshot(t testing.TB) *ordertest.Baseline {
	t.Helper()
	base, err := ordertest.Snapshot(b.Ctx, b.DB)
	require.NoError(t, err)
	return base
}

// Check fails the test if an invariant broke since base.
func (b *Bundle) Check(t testing.TB, base *ordertest.Baseline) {
	t.Helper()
	require.NoError(t, ordertest.Check(b.Ctx, b.DB, base))
}

// Counts counts the orders by status.
func (b *Bundle) Counts(t testing.TB) ordertest.StatusCounts {
	t.Helper()
	return ordertest.CountsOf(t, b.DB)
}

// Count runs query, which selects one number.
func (b *Bundle) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	return b.DB.Count(t, query, args...)
}

// RedisKeys counts the test's keys in the shared Redis.
func (b *Bundle) RedisKeys(t testing.TB) int {
	t.Helper()
	keys, err := b.RDB.Keys(b.Ctx, b.Prefix+"*").Result()
	require.NoError(t, err)
	return len(keys)
}

// Shop stocks SKUs 1-5 through the bundle's Service (Shop).
func (b *Bundle) Shop(t testing.TB) { Shop(t, b.Svc) }

// Place places an order through the bundle's Service (Place).
func (b *Bundle) Place(t testing.TB, no string, coupon bool, items ...payment.Item) {
	t.Helper()
	Place(t, b.Svc, no, coupon, items...)
}

// ShuffledOrderNos returns every order's number in a random order, for a
// race that should meet orders in no particular sequence.
func (b *Bundle) ShuffledOrderNos(t testing.TB) []string {
	t.Helper()
	var nos []string
	require.NoError(t, b.DB.SelectContext(b.Ctx, &nos, `SELECT order_no FROM order_info`))
	rand.Shuffle(len(nos), func(i, j int) { nos[i], nos[j] = nos[j], nos[i] })
	return nos
}
