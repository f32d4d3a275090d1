package main

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/app"
)

// loadConfig loads the -config file and the environment.
func loadConfig(env *cliEnv) (*config.Config, error) {
	return config.Load(env.configPath)
}

// loadConfigDB loads the config and opens the database, for the commands
// that need only MySQL (migrate, demo-data, deadletter, tasks).
func loadConfigDB(ctx context.Context, env *cliEnv) (*config.Config, *sqlx.DB, error) {
	cfg, err := loadConfig(env)
	if err != nil {
		return nil, nil, err
	}
	db, err := app.OpenDB(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}
