package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// unitBuilder returns ClosePath.NewUnit: a Closer with the close path's
// settings and locks on a source's database, closing in one of its order
// tables (the item table following its suffix), on server (what the
// database is, for the close path's error classes).
func unitBuilder(cfg *config.Config, locker *orderlock.Locker, ccfg orders.CloserConfig,
	logger *slog.Logger) func(*sqlx.DB, orders.Server, string, string) (*orders.Closer, error) {
	return func(db *sqlx.DB, server orders.Server, source, table string) (*orders.Closer, error) {
		sch, err := cfg.Order.Schema.Schema()
		if err != nil {
			return nil, fmt.Errorf("order.schema: %w", err)
		}
		c := ccfg
		c.SourceName = source
		if c.Schema, err = sch.ForTable(table); err != nil {
			return nil, fmt.Errorf("order source %s: %w", source, err)
		}
		c.Server = server
		closer, err := orders.NewCloser(db, locker, c)
		if err != nil {
			return nil, fmt.Errorf("order source %s, table %s: %w", source, table, err)
		}
		return closer, nil
	}
}

// OpenUnits opens the database of each order source (order.sources) and
// builds the Closer of every unit, a source's order table, in the
// configured order. Without order.sources the one unit is cp.Closer, on
// mysql.dsn, and no database is opened. The databases it opened, one per
// source in order.sources' order, are returned for the caller to close,
// also with an error.
func OpenUnits(ctx context.Context, cfg *config.Config, cp ClosePath, logger *slog.Logger) ([]*orders.Closer, []*sqlx.DB, error) {
	if len(cfg.Order.Sources) == 0 {
		return []*orders.Closer{cp.Closer}, nil, nil
	}
	sources, err := cfg.Sources()
	if err != nil {
		return nil, nil, err
	}
	var units []*orders.Closer
	var dbs []*sqlx.DB
	for _, src := range sources {
		db, server, err := openSource(ctx, src, logger)
		if err != nil {
			return nil, dbs, err
		}
		dbs = append(dbs, db)
		for _, table := range src.Tables {
			c, err := cp.NewUnit(db, server, src.Name, table)
			if err != nil {
				return nil, dbs, err
			}
			units = append(units, c)
		}
	}
	return units, dbs, nil
}

// openSource opens a source's pool and asks the server what it is. A
// source that does not answer now is logged, not refused (ServerUnknown):
// its units fail, each run, with what stopped them, the other sources
// close as usual, and the pool connects once it answers again.
func openSource(ctx context.Context, src config.Source, logger *slog.Logger) (*sqlx.DB, orders.Server, error) {
	db, err := openPool(src.MySQL)
	if err != nil {
		return nil, orders.ServerUnknown, fmt.Errorf("order source %s: %w", src.Name, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	server, err := orders.DetectServer(dctx, db)
	if err != nil {
		logger.Warn("order source does not answer; its units fail until it does", "source", src.Name, "err", err)
		return db, orders.ServerUnknown, nil
	}
	return db, server, nil
}
