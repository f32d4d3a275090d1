package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderlock"
)

// unitBuilder returns ClosePath.NewUnit: a Closer with the close path's
// settings and locks on a source's database, closing in one of its order
// tables (the item table following its suffix), on server (what the
// database is, for the close path's error classes).
func unitBuilder(cfg *config.Config, locker *orderlock.Locker, ccfg orders.CloserConfig,
	logger *slog.Logger) func(*sqlx.DB, dbserver.Server, string, string) (*orders.Closer, error) {
	return func(db *sqlx.DB, server dbserver.Server, source, table string) (*orders.Closer, error) {
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

// Units are the units of order.sources as OpenUnits opens them, in the
// configured order: the close's Closer and the lifecycle jobs' Jobs of
// each, and the databases opened for them.
type Units struct {
	Closers   []*orders.Closer
	Lifecycle []*lifecycle.Jobs // none when the lifecycle jobs are off
	DBs       []*sqlx.DB
}

// OpenUnits opens the database of each order source (order.sources) and
// builds the Closer and, unless newLifecycle is nil, the lifecycle jobs
// of every unit, a source's order table, in the configured order. Without
// order.sources the one unit is cp.Closer, on mysql.dsn, no database is
// opened and no lifecycle jobs are built (the caller's, on mysql.dsn,
// serve). The databases it opened, one per source in order.sources'
// order, are returned for the caller to close, also with an error.
func OpenUnits(ctx context.Context, cfg *config.Config, cp ClosePath,
	newLifecycle func(*sqlx.DB, dbserver.Server, string, string) (*lifecycle.Jobs, error), logger *slog.Logger) (Units, error) {
	if len(cfg.Order.Sources) == 0 {
		return Units{Closers: []*orders.Closer{cp.Closer}}, nil
	}
	sources, err := cfg.Sources()
	if err != nil {
		return Units{}, err
	}
	var u Units
	for _, src := range sources {
		db, server, err := openSource(ctx, cfg, src, logger)
		if db != nil {
			u.DBs = append(u.DBs, db)
		}
		if err != nil {
			return u, err
		}
		for _, table := range src.Tables {
			c, err := cp.NewUnit(db, server, src.Name, table)
			if err != nil {
				return u, err
			}
			u.Closers = append(u.Closers, c)
			if newLifecycle == nil {
				continue
			}
			l, err := newLifecycle(db, server, src.Name, table)
			if err != nil {
				return u, fmt.Errorf("order source %s, table %s: %w", src.Name, table, err)
			}
			u.Lifecycle = append(u.Lifecycle, l)
		}
	}
	return u, nil
}

// RetryUnits are the Closers deadLetterRetryJob retries the letters of:
// without order.sources home alone (the Closer of mysql.dsn); else the
// units, each source's database keeping its own letters, and home as
// well when mysql.dsn is no source's database, for the letters its
// delayed-task closes write there.
func RetryUnits(cfg *config.Config, home *orders.Closer, units []*orders.Closer) ([]*orders.Closer, error) {
	if len(cfg.Order.Sources) == 0 {
		return []*orders.Closer{home}, nil
	}
	sources, err := cfg.Sources()
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(sources, cfg.OnHomeDatabase) {
		return units, nil
	}
	for _, u := range units {
		if u.Source() == home.Source() && u.Table() == home.Table() {
			return units, nil // a source named like home's: its letters are that unit's
		}
	}
	return append(slices.Clip(units), home), nil
}

// openSource opens a source's pool, asks the server what it is and checks
// its schema (checkSource) and session time zone (checkSourceZone). A
// source that does not answer now is logged, not refused
// (dbserver.ServerUnknown): its units fail, each run, with what stopped
// them, the other sources close as usual, and the pool connects once it
// answers again. A source whose schema lacks something, or whose session
// zone observes daylight saving, is refused as mysql.dsn's database is.
func openSource(ctx context.Context, cfg *config.Config, src config.Source, logger *slog.Logger) (*sqlx.DB, dbserver.Server, error) {
	db, err := openPool(src.MySQL)
	if err != nil {
		return nil, dbserver.ServerUnknown, fmt.Errorf("order source %s: %w", src.Name, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	server, err := dbserver.DetectServer(dctx, db)
	var refused *mysql.MySQLError
	switch {
	case errors.As(err, &refused):
		// It answered, with a no (a wrong password, no grant on the
		// database): what fixes it is the DSN or a GRANT, not waiting.
		logger.Warn("order source refuses the executor's user; its units fail until it lets it in", "source", src.Name,
			"err", err, "hint", dbserver.Hint(err))
		return db, dbserver.ServerUnknown, nil
	case err != nil:
		logger.Warn("order source does not answer; its units fail until it does", "source", src.Name, "err", err)
		return db, dbserver.ServerUnknown, nil
	}
	if err := checkSource(ctx, cfg, src, db, logger); err != nil {
		return db, server, err
	}
	if err := checkSourceZone(ctx, cfg, src, db, logger); err != nil {
		return db, server, err
	}
	return db, server, nil
}
