package payment_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders/payment"
)

// Each constructor refuses bad settings with a message naming the setting
// and its value, without connecting anywhere.
func TestConstructorRefusals(t *testing.T) {
	t.Parallel()
	db, locker := paytest.Unconnected(t)
	service := func(cfg payment.ServiceConfig) error { _, err := payment.NewService(db, locker, cfg); return err }
	trade := func(cfg payment.HTTPTradeCloserConfig) error { _, err := payment.NewHTTPTradeCloser(cfg); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"service: no database", func() error { _, err := payment.NewService(nil, locker, payment.ServiceConfig{}); return err }(), "orders: NewService needs a database and a locker"},
		{"service: lock tries", service(payment.ServiceConfig{LockTries: -1}), "orders: lock tries -1 below 1"},
		{"trade closer: no URL", trade(payment.HTTPTradeCloserConfig{}), "orders: close-trade URL \"\" is not an http(s) URL"},
		{"trade closer: scheme", trade(payment.HTTPTradeCloserConfig{URL: "ftp://pay.example/close"}), "orders: close-trade URL \"ftp://pay.example/close\" is not an http(s) URL"},
		{"trade closer: negative retries", trade(payment.HTTPTradeCloserConfig{URL: "http://pay.example/close", Retries: -1}), "orders: close-trade retries -1 out of [0, 10]"},
		{"trade closer: retries", trade(payment.HTTPTradeCloserConfig{URL: "http://pay.example/close", Retries: 11}), "orders: close-trade retries 11 out of [0, 10]"},
		{"trade closer: timeout", trade(payment.HTTPTradeCloserConfig{URL: "http://pay.example/close", Timeout: -time.Second}), "orders: close-trade timeout and retry wait must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
	require.NoError(t, service(payment.ServiceConfig{}), "the defaults are valid")
	require.NoError(t, trade(payment.HTTPTradeCloserConfig{URL: "https://pay.example/close"}), "the defaults are valid")
}
