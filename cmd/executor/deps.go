package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/config"
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
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// newLogger builds the process logger on w in the configured format.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	lvl, _ := config.ParseLevel(cfg.Log.Level) // validated by Load
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText}
	// newCtxHandler: lines written under a run's or a delayed task's
	// context carry its job_id and log_id, or its trace_id.
	if cfg.Log.Format == "text" {
		return slog.New(newCtxHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(newCtxHandler(slog.NewJSONHandler(w, opts)))
}

// durationText writes durations as Go duration text ("1.5s"), not as
// nanoseconds, so a reader needs no unit and no arithmetic.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// openDB opens and pings MySQL with the executor's DSN settings.
func openDB(ctx context.Context, cfg *config.Config) (*sqlx.DB, error) {
	dsn, err := cfg.MySQL.NormalizedDSN()
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
	db.SetMaxOpenConns(cfg.MySQL.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MySQL.MaxOpenConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: ping: %w", err)
	}
	return db, nil
}

// newRedis builds the universal client for the configured mode.
func newRedis(cfg config.Redis) (redis.UniversalClient, error) {
	opt := &redis.UniversalOptions{
		Addrs:        cfg.Addr,
		Username:     cfg.Username,
		Password:     cfg.Password,
		DB:           cfg.DB,
		MasterName:   cfg.MasterName,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	}
	switch cfg.Mode {
	case "single":
		if len(cfg.Addr) != 1 {
			return nil, errors.New("redis: single mode takes exactly one address")
		}
		return redis.NewClient(opt.Simple()), nil
	case "sentinel":
		return redis.NewFailoverClient(opt.Failover()), nil
	case "cluster":
		return redis.NewClusterClient(opt.Cluster()), nil
	default: // auto: the universal client's own rule
		return redis.NewUniversalClient(opt), nil
	}
}

// newLockNodes builds one client per independent lock node (Redlock).
func newLockNodes(cfg config.Redis) []redis.UniversalClient {
	var nodes []redis.UniversalClient
	for _, a := range cfg.LockNodes {
		nodes = append(nodes, redis.NewClient(&redis.Options{
			Addr: strings.TrimSpace(a), Username: cfg.Username, Password: cfg.Password,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		}))
	}
	return nodes
}
