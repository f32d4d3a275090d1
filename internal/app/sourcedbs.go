package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/schema"
)

// sourceDB is the pool of one order source's database.
type sourceDB struct {
	name   string
	dsn    string // normalized: sources with the same one share a database
	db     *sqlx.DB
	home   bool     // on mysql.dsn's database: db is the home pool
	tables []string // its order tables
}

// sourceDBs pairs every order source (cfg.Sources(): "default" alone
// without order.sources) with its pool: home for a source on mysql.dsn's
// database, else its own from dbs (one per source, in order.sources'
// order, as OpenUnits returns them). A source without a pool in dbs is
// left out.
func sourceDBs(cfg *config.Config, home *sqlx.DB, dbs []*sqlx.DB) ([]sourceDB, error) {
	sources, err := cfg.Sources()
	if err != nil {
		return nil, err
	}
	homeDSN, _ := cfg.MySQL.NormalizedDSN() // checked by the loader
	var out []sourceDB
	for i, src := range sources {
		dsn, _ := src.MySQL.NormalizedDSN()
		switch {
		case dsn == homeDSN:
			out = append(out, sourceDB{name: src.Name, dsn: dsn, db: home, home: true, tables: src.Tables})
		case i < len(dbs):
			out = append(out, sourceDB{name: src.Name, dsn: dsn, db: dbs[i], tables: src.Tables})
		}
	}
	return out, nil
}

// homeName names mysql.dsn's database where what is kept per order
// database is told apart by source (the outbox relays, the delayed-task
// and refunds metrics): the first order source on it, else
// defaultName's.
func homeName(sdbs []sourceDB) string {
	for _, s := range sdbs {
		if s.home {
			return s.name
		}
	}
	return defaultName(sdbs)
}

// defaultName names what is mysql.dsn's alone, its database or its own
// pool, beside the order sources sdbs: "default", or "mysql.dsn" when an
// order source is named so (its series would collide).
func defaultName(sdbs []sourceDB) string {
	for _, s := range sdbs {
		if s.name == config.DefaultSourceName {
			return "mysql.dsn"
		}
	}
	return config.DefaultSourceName
}

// otherDatabases are the order databases other than mysql.dsn's, each
// once, named by the first source on it, in order.sources' order.
func otherDatabases(sdbs []sourceDB) []sourceDB {
	var out []sourceDB
	seen := map[string]bool{}
	for _, s := range sdbs {
		if !s.home && !seen[s.dsn] {
			seen[s.dsn] = true
			out = append(out, s)
		}
	}
	return out
}

// sourcesCheck is /readyz?sources=1: every order source's database on
// another server or schema than mysql.dsn's answers a ping (dbs:
// otherDatabases), all at once, so one that hangs does not hide the rest;
// the error names each source that does not answer.
func sourcesCheck(dbs []sourceDB) func(context.Context) error {
	return func(ctx context.Context) error {
		errs := make([]error, len(dbs))
		var wg sync.WaitGroup
		for i, s := range dbs {
			wg.Go(func() {
				if err := s.db.PingContext(ctx); err != nil {
					errs[i] = fmt.Errorf("order source %s: %w", s.name, err)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}

// sourcedViews builds an operator view on the database of every order
// source (sdbs: Deps.sources), for the API routes that take ?source=:
// home's (mysql.dsn's) serves a request without it and every source on
// that database; without order.sources it is "default".
func sourcedViews[V any](home *sqlx.DB, sdbs []sourceDB, newView func(*sqlx.DB) V) api.Sourced[V] {
	if len(sdbs) == 0 {
		return api.HomeOnly(newView(home))
	}
	views := api.Sourced[V]{Home: newView(home), By: map[string]V{}}
	for _, s := range sdbs {
		if s.home {
			views.By[s.name] = views.Home
		} else {
			views.By[s.name] = newView(s.db)
		}
	}
	return views
}

// consoleSources are the order sources the console offers by name (none
// without order.sources: d.sources), each looking orders up in its own
// order tables (sch's layout), counting the due orders of its units of the
// close, and reading the delayed tasks of its database (tasks, from
// sourcedTasks).
func consoleSources(sch schema.Schema, d *Deps, tasks api.Sourced[*delay.Client]) ([]api.ConsoleSource, error) {
	var out []api.ConsoleSource
	for _, s := range d.sources {
		in, err := inspect.New(s.db, d.compensation).InTables(sch, s.tables)
		if err != nil {
			return nil, fmt.Errorf("order source %s: %w", s.name, err)
		}
		var units []inspect.Unit
		for _, u := range d.units {
			if u.Source() == s.name {
				units = append(units, u)
			}
		}
		out = append(out, api.ConsoleSource{Name: s.name, DB: s.db, View: in.CountingDue(units...), Home: s.home, Tasks: tasks.By[s.name]})
	}
	return out, nil
}
