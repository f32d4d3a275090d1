package app

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders/lifecycle"
)

// errLifecycleDeclared is why the lifecycle jobs are not built on a
// declared order.schema.
var errLifecycleDeclared = errors.New("the order lifecycle jobs work on the executor's own order_info " +
	"(paid, shipped and completed statuses, pay and ship times), not on a declared order.schema; " +
	"this executor was started without them")

// newLifecycle builds the lifecycle jobs' domain object from order.timeout
// (the days) and order.close.pageSize (the default page). On a declared
// order.schema it builds none and says why (off): their statements name the
// executor's own order table and statuses, and would fail at every run.
func newLifecycle(db *sqlx.DB, cfg *config.Config, logger *slog.Logger, obs lifecycle.Observer) (l *lifecycle.Jobs, off, err error) {
	if cfg.Order.Schema.Table != "" {
		logger.Warn("order lifecycle jobs off", "reason", errLifecycleDeclared.Error())
		return nil, errLifecycleDeclared, nil
	}
	l, err = lifecycle.New(db, lifecycle.Config{
		Logger:                 logger, // New tags it
		AutoConfirmDays:        cfg.Order.Timeout.AutoConfirmDays,
		FulfillmentTimeoutDays: cfg.Order.Timeout.FulfillmentTimeoutDays,
		PageSize:               cfg.Order.Close.PageSize,
		Observer:               obs,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("order lifecycle: %w", err)
	}
	return l, nil, nil
}
