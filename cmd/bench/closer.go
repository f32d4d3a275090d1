package main

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/orders"
)

// newCloser builds the order closer as the executor does (app.NewClosePath
// over the configuration's defaults), with the bench's lock key prefix and,
// when not 0, its page size. log may be nil.
func newCloser(db *sqlx.DB, rdb redis.UniversalClient, lockPrefix string, pageSize int, log *slog.Logger) (*orders.Closer, error) {
	cp, err := newClosePath(db, rdb, lockPrefix, pageSize, log)
	if err != nil {
		return nil, err
	}
	return cp.Closer, nil
}

// newClosePath is the close path newCloser takes its Closer from; its
// NewUnit builds the Closers of order sources as the executor does.
func newClosePath(db *sqlx.DB, rdb redis.UniversalClient, lockPrefix string, pageSize int, log *slog.Logger) (app.ClosePath, error) {
	cfg := config.Default()
	cfg.Order.Close.LockKeyPrefix = lockPrefix
	cfg.Order.Close.PageSize = cmp.Or(pageSize, cfg.Order.Close.PageSize)
	return app.NewClosePath(context.Background(), db, rdb, nil, cfg, cmp.Or(log, slog.New(slog.DiscardHandler)), nil)
}
