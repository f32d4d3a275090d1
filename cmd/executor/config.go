package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/app"
)

// loadConfig loads the -config file and the environment.
func loadConfig(ctx context.Context, env *cliEnv) (*config.Config, error) {
	var data []byte
	if env.configPath != "" {
		var err error
		if data, err = readInputFile(ctx, "config", env.configPath); err != nil {
			return nil, err
		}
	}
	return config.LoadFileWith(env.configPath, data, os.LookupEnv)
}

// loadConfigDB loads the config and opens the database, for the commands
// that need only MySQL (migrate, demo-data, deadletter, tasks).
func loadConfigDB(ctx context.Context, env *cliEnv) (*config.Config, *sqlx.DB, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	db, err := app.OpenDB(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// loadSourceDB loads the config and opens the database of the order source
// called name, for the operator commands that read one database (deadletter,
// refunds, outbox, tasks). An empty name is mysql.dsn, the home database.
// The source is returned with its expanded tables; for mysql.dsn it is the
// source named "default" when there is one, else one built from mysql.*.
func loadSourceDB(ctx context.Context, env *cliEnv, name string) (*config.Config, config.Source, *sqlx.DB, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, config.Source{}, nil, err
	}
	src, err := sourceNamed(cfg, name)
	if err != nil {
		return nil, config.Source{}, nil, err
	}
	if name == "" {
		if note := otherDatabasesNote(cfg, src); note != "" {
			fmt.Fprintln(env.stderr, note)
		}
	}
	scfg := *cfg
	scfg.MySQL = src.MySQL
	db, err := app.OpenDB(ctx, &scfg)
	if err != nil {
		return nil, config.Source{}, nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	return cfg, src, db, nil
}

// sourceNamed finds the order source called name; "" is mysql.dsn, and
// so is "default" when no source has that name.
func sourceNamed(cfg *config.Config, name string) (config.Source, error) {
	srcs, err := cfg.Sources()
	if err != nil {
		return config.Source{}, err
	}
	if name == "" {
		for _, s := range srcs {
			if cfg.OnHomeDatabase(s) {
				return s, nil
			}
		}
		return config.Source{Name: config.DefaultSourceName, MySQL: cfg.MySQL}, nil
	}
	var names []string
	for _, s := range srcs {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	if name == config.DefaultSourceName {
		// The metrics label mysql.dsn's letters so when it is no source.
		return sourceNamed(cfg, "")
	}
	return config.Source{}, usagef("-source %q is not an order source (the sources: %s)", name, strings.Join(names, ", "))
}

// otherDatabasesNote says, for a command reading mysql.dsn's database
// (src, without -source), which order sources keep their rows in other
// databases: a list that is empty here may not be empty there. It is ""
// without order.sources or when every source is on mysql.dsn's database.
func otherDatabasesNote(cfg *config.Config, src config.Source) string {
	if len(cfg.Order.Sources) == 0 {
		return ""
	}
	srcs, err := cfg.Sources()
	if err != nil {
		return ""
	}
	var others []string
	for _, s := range srcs {
		if !cfg.OnHomeDatabase(s) {
			others = append(others, s.Name)
		}
	}
	if len(others) == 0 {
		return ""
	}
	which := ""
	if src.Name != config.DefaultSourceName {
		which = " (order source " + src.Name + ")"
	}
	return fmt.Sprintf("reading mysql.dsn's database%s; the order sources in other databases: %s (add -source NAME)",
		which, strings.Join(others, ", "))
}

// addSourceFlag adds -source to a command that reads one order database.
func addSourceFlag(fs *flag.FlagSet, name *string) {
	fs.StringVar(name, "source", "", "the order source (order.sources name) whose database to read; empty: mysql.dsn")
}
