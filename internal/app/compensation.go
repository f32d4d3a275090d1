package app

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/payment"
)

// closeExtensions are the optional parts of the close path: the payment
// side's close-trade step and outbox compensation (its relays: relays.go).
type closeExtensions struct {
	tradeCloser  orders.TradeCloser // nil: no payment step
	compensation orders.CompensationMode
}

// newCloseExtensions builds them from order.payment and order.compensation.
func newCloseExtensions(cfg *config.Config, logger *slog.Logger) (closeExtensions, error) {
	var ext closeExtensions
	if p := cfg.Order.Payment; p.CloseURL != "" {
		tc, err := payment.NewHTTPTradeCloser(payment.HTTPTradeCloserConfig{
			URL: p.CloseURL, Token: p.Token, TokenHeader: p.TokenHeader, Timeout: p.Timeout, Retries: p.Retries,
		})
		if err != nil {
			return ext, fmt.Errorf("order.payment: %w", err)
		}
		ext.tradeCloser = tc
		if cfg.Order.Close.LockTTL < 2*p.Timeout*time.Duration(p.Retries+1) {
			logger.Warn("order.close.lockTTL is short for the payment step: close-trade calls get half of it, orders whose call has not answered by then wait for the next pass",
				"lock_ttl", cfg.Order.Close.LockTTL.String(), "payment_timeout", p.Timeout.String(), "payment_retries", p.Retries)
		}
	}
	c := cfg.Order.Compensation
	mode, err := orders.ParseCompensationMode(c.Mode)
	if err != nil {
		return ext, fmt.Errorf("order.compensation: %w", err)
	}
	ext.compensation = mode
	return ext, nil
}
