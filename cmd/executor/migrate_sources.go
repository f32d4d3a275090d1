package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/sql/migrations"
)

// migrateSources migrates the database of every order source
// (order.sources) after mysql.dsn's: the executor's own tables live beside
// each source's orders, so that every close stays one local transaction.
// A source on mysql.dsn's database is not migrated twice. With a declared
// schema (order.schema), the shop's tables checked in a source are those
// of its first order table. A source that
// fails is reported and the others are migrated all the same; the command
// then fails naming every source that did.
func migrateSources(ctx context.Context, env *cliEnv, cfg *config.Config, mcfg migrations.Config, dry bool) error {
	if len(cfg.Order.Sources) == 0 {
		return nil
	}
	sources, err := cfg.Sources()
	if err != nil {
		return err
	}
	var errs []error
	for _, src := range sources {
		if cfg.OnHomeDatabase(src) {
			fmt.Fprintf(env.stdout, "order source %s: mysql.dsn's database, migrated above\n", src.Name)
			continue
		}
		fmt.Fprintf(env.stdout, "order source %s:\n", src.Name)
		if err := migrateSource(ctx, env, cfg, src, mcfg, dry); err != nil {
			fmt.Fprintf(env.stdout, "order source %s: FAILED: %v\n", src.Name, err)
			errs = append(errs, fmt.Errorf("order source %s: %w", src.Name, err))
		}
	}
	return errors.Join(errs...)
}

func migrateSource(ctx context.Context, env *cliEnv, cfg *config.Config, src config.Source, mcfg migrations.Config, dry bool) error {
	from, err := app.SourceMigrationsConfig(cfg, src, false)
	if err != nil {
		return err
	}
	// The shop's tables of this source, not mysql.dsn's: home's config
	// names its own source's first order table in OrderTables.
	mcfg.Shop, mcfg.OrderTables = from.Shop, from.OrderTables
	db, err := openSourceDB(ctx, cfg, src)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateDB(ctx, env, db, mcfg, dry)
}

// openSourceDB opens the database of order source src.
func openSourceDB(ctx context.Context, cfg *config.Config, src config.Source) (*sqlx.DB, error) {
	scfg := *cfg
	scfg.MySQL = src.MySQL
	return app.OpenDB(ctx, &scfg)
}

// sourceStatus is migrate status of one order source's database: the
// executor's tables beside its orders and every order table it lists.
type sourceStatus struct {
	Name   string             `json:"name"`
	Status *migrations.Status `json:"status,omitempty"`
	// Error is why the database could not be read (down, refused).
	Error string `json:"error,omitempty"`
}

// sourceStatuses reads the status of every order source's database (none
// without order.sources). A source that cannot be read is reported with
// its error and the others are read all the same.
func sourceStatuses(ctx context.Context, cfg *config.Config) ([]sourceStatus, error) {
	if len(cfg.Order.Sources) == 0 {
		return nil, nil
	}
	sources, err := cfg.Sources()
	if err != nil {
		return nil, err
	}
	out := make([]sourceStatus, len(sources))
	for i, src := range sources {
		out[i].Name = src.Name
		if out[i].Status, err = sourceStatusOf(ctx, cfg, src); err != nil {
			out[i].Error = err.Error()
		}
	}
	return out, nil
}

func sourceStatusOf(ctx context.Context, cfg *config.Config, src config.Source) (*migrations.Status, error) {
	mcfg, err := app.SourceMigrationsConfig(cfg, src, true)
	if err != nil {
		return nil, err
	}
	db, err := openSourceDB(ctx, cfg, src)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return nil, err
	}
	return m.Status(ctx)
}

// printStatuses prints mysql.dsn's status, then each source's under its
// name; as JSON, the sources are a list beside the home database's fields.
func printStatuses(env *cliEnv, st *migrations.Status, srcs []sourceStatus, jsonOut bool) error {
	if jsonOut {
		if len(srcs) == 0 {
			return printJSON(env.stdout, st)
		}
		return printJSON(env.stdout, struct {
			*migrations.Status
			Sources []sourceStatus `json:"sources"`
		}{st, srcs})
	}
	printStatus(env, st)
	for _, s := range srcs {
		if s.Error != "" {
			fmt.Fprintf(env.stdout, "order source %s: FAILED: %s\n", s.Name, s.Error)
			continue
		}
		fmt.Fprintf(env.stdout, "order source %s:\n", s.Name)
		printStatus(env, s.Status)
	}
	return nil
}
