package app

import (
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/api"
)

// sourceDB is the pool of one order source's database.
type sourceDB struct {
	name string
	dsn  string // normalized: sources with the same one share a database
	db   *sqlx.DB
	home bool // on mysql.dsn's database: db is the home pool
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
			out = append(out, sourceDB{name: src.Name, dsn: dsn, db: home, home: true})
		case i < len(dbs):
			out = append(out, sourceDB{name: src.Name, dsn: dsn, db: dbs[i]})
		}
	}
	return out, nil
}

// sourcedViews builds an operator view on the database of every order
// source, for the API routes that take ?source=: mysql.dsn's serves a
// request without it and every source on that database.
func sourcedViews[V any](cfg *config.Config, d *Deps, newView func(*sqlx.DB) V) (api.Sourced[V], error) {
	sdbs, err := sourceDBs(cfg, d.db, d.unitDBs)
	if err != nil {
		return api.Sourced[V]{}, err
	}
	views := api.Sourced[V]{Home: newView(d.db), By: map[string]V{}}
	for _, s := range sdbs {
		if s.home {
			views.By[s.name] = views.Home
		} else {
			views.By[s.name] = newView(s.db)
		}
	}
	return views, nil
}
