package app

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
	"github.com/orderjob/executor/internal/logctx"
)

// NewLogger builds the process logger on w in the configured format. Lines
// written under a run's or a delayed task's context carry its job_id and
// log_id, or its trace_id (logctx).
func NewLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	lvl, _ := config.ParseLevel(cfg.Log.Level) // validated by Load
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText}
	if cfg.Log.Format == "text" {
		return slog.New(logctx.NewHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(logctx.NewHandler(slog.NewJSONHandler(w, opts)))
}

// durationText writes durations as Go duration text ("1.5s"), not as
// nanoseconds, so a reader needs no unit and no arithmetic.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// LogNotices logs what the configuration says about itself (keys of a Java
// executor that work differently here).
func LogNotices(logger *slog.Logger, cfg *config.Config) {
	for _, n := range cfg.Notices() {
		logger.Log(context.Background(), n.Level, n.Msg)
	}
}

// OpenDB opens and pings MySQL with the executor's DSN settings.
func OpenDB(ctx context.Context, cfg *config.Config) (*sqlx.DB, error) {
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

// NewRedis builds the universal client for the configured mode, with the
// Sentinels' credentials and TLS (redis.tls) on every connection.
func NewRedis(cfg config.Redis) (redis.UniversalClient, error) {
	tlsConf, err := cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	opt := &redis.UniversalOptions{
		Addrs:            cfg.Addr,
		Username:         cfg.Username,
		Password:         cfg.Password,
		SentinelUsername: cfg.SentinelUsername,
		SentinelPassword: cfg.SentinelPassword,
		DB:               cfg.DB,
		MasterName:       cfg.MasterName,
		TLSConfig:        tlsConf,
		DialTimeout:      2 * time.Second,
		ReadTimeout:      2 * time.Second,
		WriteTimeout:     2 * time.Second,
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

// newLockNodes builds one client per independent lock node (Redlock), with
// TLS as configured.
func newLockNodes(cfg config.Redis) ([]redis.UniversalClient, error) {
	tlsConf, err := cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	var nodes []redis.UniversalClient
	for _, a := range cfg.LockNodes {
		nodes = append(nodes, redis.NewClient(&redis.Options{
			Addr: strings.TrimSpace(a), Username: cfg.Username, Password: cfg.Password, TLSConfig: tlsConf,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		}))
	}
	return nodes, nil
}
