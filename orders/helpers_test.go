package orders_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

// testBundle is paytest's bundle with what only this package's tests add:
// exact orders, more Closers, runs of the bundle's Closer.
type testBundle struct{ *paytest.Bundle }

func setup(t *testing.T, opts ...paytest.Option) *testBundle {
	t.Helper()
	return &testBundle{paytest.Setup(t, opts...)}
}

// build inserts exactly the orders given (ordertest.Order), for a test
// about those orders, and takes the invariants' baseline.
func (b *testBundle) build(t *testing.T, opts ...ordertest.OrderOpts) *ordertest.Baseline {
	t.Helper()
	for _, o := range opts {
		ordertest.Order(t, b.DB.DB, o)
	}
	return b.Snapshot(t)
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

// ids runs query, which selects ids, and returns them.
func (b *testBundle) ids(t *testing.T, query string, args ...any) []int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, b.DB.SelectContext(b.Ctx, &ids, query, args...), query)
	return ids
}

// newCloser makes another Closer over the bundle's database and locker.
func (b *testBundle) newCloser(t *testing.T, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	c, err := orders.NewCloser(b.DB.DB, b.Locker, cfg)
	require.NoError(t, err)
	return c
}

// shiftedCloser is newCloser whose runs read the database's clock shift
// later.
func (b *testBundle) shiftedCloser(t *testing.T, shift time.Duration, cfg orders.CloserConfig) *orders.Closer {
	t.Helper()
	return orders.ShiftClock(b.newCloser(t, cfg), shift)
}

// run runs the bundle's closer and fails the test on an error.
func (b *testBundle) run(t *testing.T, opt orders.RunOptions) orders.RunStats {
	t.Helper()
	st, err := b.Closer.Run(b.Ctx, opt)
	require.NoError(t, err)
	return st
}

// payAll pays every order of nos from four goroutines on g, counting the
// payments that went through in paid and those that came too late (the
// order closed first) in tooLate; any other outcome fails g.
func (b *testBundle) payAll(g *errgroup.Group, nos []string, paid, tooLate *atomic.Int64) {
	const payers = 4
	for w := range payers {
		g.Go(func() error {
			for i := w; i < len(nos); i += payers {
				out, err := b.Svc.Pay(b.Ctx, nos[i])
				if err != nil {
					return err
				}
				switch out {
				case payment.Paid:
					paid.Add(1)
				case payment.AlreadyClosed:
					tooLate.Add(1)
				default:
					return fmt.Errorf("order %s: unexpected %v", nos[i], out)
				}
			}
			return nil
		})
	}
}
