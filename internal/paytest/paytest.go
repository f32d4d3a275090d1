// Package paytest holds what the tests of the close (package orders) and
// of the order service's side (package payment) share: the Bundle they
// start from (a database, Redis, a Locker, a Closer and a Service),
// stocking a shop and placing orders through a payment.Service, and an
// HTTPTradeCloser calling an ordertest.PaySide.
package paytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders/payment"
)

// Shop stocks SKUs 1-5 with 100 units each, through svc.
func Shop(t testing.TB, svc *payment.Service) {
	t.Helper()
	for sku := int64(1); sku <= 5; sku++ {
		require.NoError(t, svc.AddStock(context.Background(), sku, 100))
	}
}

// Place places order no of user 7 through svc, with a new coupon of the
// user's when coupon is set.
func Place(t testing.TB, svc *payment.Service, no string, coupon bool, items ...payment.Item) {
	t.Helper()
	ctx := context.Background()
	o := payment.NewOrder{OrderNo: no, UserID: 7, Items: items}
	if coupon {
		id, err := svc.IssueCoupon(ctx, 7)
		require.NoError(t, err)
		o.CouponID = id
	}
	_, err := svc.PlaceOrder(ctx, o)
	require.NoError(t, err)
}

// TradeCloser is an HTTPTradeCloser calling p, with short timeouts and
// retry waits.
func TradeCloser(t testing.TB, p *ordertest.PaySide, retries int) *payment.HTTPTradeCloser {
	t.Helper()
	tc, err := payment.NewHTTPTradeCloser(payment.HTTPTradeCloserConfig{URL: p.URL(), Token: p.Token(),
		Timeout: 200 * time.Millisecond, Retries: retries, RetryWait: 5 * time.Millisecond, Client: p.Client()})
	require.NoError(t, err)
	return tc
}
