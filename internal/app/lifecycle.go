package app

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders/lifecycle"
)

// errLifecycleDeclared is why the lifecycle jobs are not built on a
// declared order.schema.
var errLifecycleDeclared = errors.New("the order lifecycle jobs work on the executor's own order_info " +
	"(paid, shipped and completed statuses, pay and ship times), not on a declared order.schema; " +
	"this executor was started without them")

// lifecycleOff says why the lifecycle jobs are not built (a declared
// order.schema: their statements name the executor's own order columns
// and statuses, and would fail at every run), nil when they are.
func lifecycleOff(cfg *config.Config, logger *slog.Logger) error {
	if cfg.Order.Schema.Table == "" {
		return nil
	}
	logger.Warn("order lifecycle jobs off", "reason", errLifecycleDeclared.Error())
	return errLifecycleDeclared
}

// lifecycleBuilder returns what builds the lifecycle jobs of one unit, an
// order table of a source's database, from order.timeout (the days) and
// order.close.pageSize (the default page). server is what the database
// is: an error it says is about the connection fails the source's other
// units of a sweep without trying each.
func lifecycleBuilder(cfg *config.Config, logger *slog.Logger,
	obs lifecycle.Observer) func(*sqlx.DB, dbserver.Server, string, string) (*lifecycle.Jobs, error) {
	return func(db *sqlx.DB, server dbserver.Server, source, table string) (*lifecycle.Jobs, error) {
		l, err := lifecycle.New(db, lifecycle.Config{
			Logger:                 logger, // New tags it
			AutoConfirmDays:        cfg.Order.Timeout.AutoConfirmDays,
			FulfillmentTimeoutDays: cfg.Order.Timeout.FulfillmentTimeoutDays,
			PageSize:               cfg.Order.Close.PageSize,
			Observer:               obs,
			Source:                 source,
			Table:                  table,
			Unreachable:            func(err error) bool { return server.Kind(err) == dbserver.KindConnection },
		})
		if err != nil {
			return nil, fmt.Errorf("order lifecycle: %w", err)
		}
		return l, nil
	}
}
