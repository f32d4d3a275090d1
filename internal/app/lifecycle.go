package app

import (
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders/lifecycle"
)

// newLifecycle builds the lifecycle jobs' domain object from order.timeout
// (the days) and order.close.pageSize (the default page).
func newLifecycle(db *sqlx.DB, cfg *config.Config, logger *slog.Logger, obs lifecycle.Observer) (*lifecycle.Jobs, error) {
	l, err := lifecycle.New(db, lifecycle.Config{
		Logger:                 logger, // New tags it
		AutoConfirmDays:        cfg.Order.Timeout.AutoConfirmDays,
		FulfillmentTimeoutDays: cfg.Order.Timeout.FulfillmentTimeoutDays,
		PageSize:               cfg.Order.Close.PageSize,
		Observer:               obs,
	})
	if err != nil {
		return nil, fmt.Errorf("order lifecycle: %w", err)
	}
	return l, nil
}
