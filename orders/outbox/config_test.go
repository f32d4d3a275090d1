package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/outbox"
)

// NewRelay refuses bad settings with a message naming the setting and its
// value, without connecting.
func TestNewRelayRefusals(t *testing.T) {
	t.Parallel()
	db := dbtest.Unconnected(t)
	ok := map[string]string{outbox.EventStockRelease: "http://inv.local/r", outbox.EventCouponRestore: "https://cpn.local/r"}
	relay := func(cfg outbox.RelayConfig) error { _, err := outbox.NewRelay(db, cfg); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no database", func() error { _, err := outbox.NewRelay(nil, outbox.RelayConfig{Endpoints: ok}); return err }(), "orders: NewRelay needs a database"},
		{"no endpoints", relay(outbox.RelayConfig{}), "orders: relay endpoint of stock.release \"\" is not an http(s) URL\norders: relay endpoint of coupon.restore \"\" is not an http(s) URL"},
		{"one endpoint", relay(outbox.RelayConfig{Endpoints: map[string]string{outbox.EventStockRelease: "http://inv.local/r"}}), "orders: relay endpoint of coupon.restore \"\" is not an http(s) URL"},
		{"batch size", relay(outbox.RelayConfig{Endpoints: ok, BatchSize: 5000}), "orders: relay batch size 5000 out of [1, 1000]"},
		{"claim TTL", relay(outbox.RelayConfig{Endpoints: ok, Timeout: time.Minute, ClaimTTL: time.Minute}), "orders: relay claim TTL 1m0s must exceed the timeout 1m0s by 2s"},
		{"backoff", relay(outbox.RelayConfig{Endpoints: ok, BackoffBase: time.Hour, BackoffMax: time.Minute}), "orders: relay: backoff base 1h0m0s is above its maximum 1m0s"},
		{"all at once", relay(outbox.RelayConfig{Endpoints: ok, BatchSize: 5000, Workers: 300}), "orders: relay batch size 5000 out of [1, 1000]\norders: relay workers 300 out of [1, 256]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
	require.NoError(t, relay(outbox.RelayConfig{Endpoints: ok}), "the defaults are valid")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ORD-1:stock.release", outbox.IdempotencyKey("ORD-1", outbox.EventStockRelease))
}
