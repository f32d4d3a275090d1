package main

import (
	"context"
	"errors"
	"fmt"

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
	home, _ := cfg.MySQL.NormalizedDSN() // checked by the loader
	var errs []error
	for _, src := range sources {
		if dsn, _ := src.MySQL.NormalizedDSN(); dsn == home {
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
	if mcfg.Shop.Declared {
		sch, err := mcfg.Shop.ForTable(src.Tables[0])
		if err != nil {
			return err
		}
		mcfg.Shop = sch
	}
	scfg := *cfg
	scfg.MySQL = src.MySQL
	db, err := app.OpenDB(ctx, &scfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrateDB(ctx, env, db, mcfg, dry)
}
