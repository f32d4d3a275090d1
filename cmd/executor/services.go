package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/xxljob"
)

// services are the connections and domain objects a process shares.
type services struct {
	db        *sqlx.DB
	rdb       redis.UniversalClient
	lockNodes []redis.UniversalClient
	locker    *orderlock.Locker
	closer    *orders.Closer
	delay     *delay.Dispatcher    // built, not started: serve starts it
	rabbit    *delay.RabbitMQTimer // delay.timer rabbitmq: started here (it connects in the background), stopped by Close
	relay     *orders.Relay        // outbox compensation only; built, not started: serve starts it
	lifecycle *orders.Lifecycle    // orderAutoConfirmJob, orderFulfillmentTimeoutJob
	// compensation is where closes give stock and coupons back.
	compensation orders.CompensationMode
}

// openDeps connects to MySQL and Redis and builds the order closer.
// obs, optional, are the metrics hooks (serve passes them).
func openDeps(ctx context.Context, cfg *config.Config, logger *slog.Logger, obs ...observers) (*services, error) {
	o := pickObservers(obs)
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkDatabase(ctx, cfg, db, logger); err != nil {
		db.Close()
		return nil, err
	}
	s := &services{db: db}
	rdb, err := newRedis(cfg.Redis)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.rdb = rdb
	s.lockNodes = newLockNodes(cfg.Redis)
	s.locker, err = orderlock.New(orderlock.Config{
		Client:   rdb,
		Nodes:    s.lockNodes,
		Prefix:   cfg.Order.Close.LockKeyPrefix,
		TTL:      cfg.Order.Close.LockTTL,
		Observer: o.orders,
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("order locks: %w", err)
	}
	ext, err := newCloseExtensions(db, cfg, logger)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.relay, s.compensation = ext.relay, ext.compensation
	s.closer, err = orders.NewCloser(db, s.locker, orders.CloserConfig{
		Logger:       logger, // NewCloser tags its lines itself
		TradeCloser:  ext.tradeCloser,
		Compensation: ext.compensation,
		Observer:     o.orders,
		RunRetention: cfg.Order.Close.RunRetention,
		// deadLetterRetryJob and the close sweep share the retry policy.
		DeadLetterBackoff: orders.DeadLetterBackoff{Base: cfg.Order.DeadLetter.BaseBackoff,
			Max: cfg.Order.DeadLetter.MaxBackoff, ParkAfter: cfg.Order.DeadLetter.MaxAttempts},
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("order closer: %w", err)
	}
	if s.lifecycle, err = newLifecycle(db, cfg, logger, o.lifecycle); err != nil {
		s.Close()
		return nil, err
	}
	services, err := delay.ParseServices(cfg.Delay.Services)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("delay.services: %w", err)
	}
	if s.rabbit, err = startRabbitTimer(ctx, cfg, db, logger); err != nil {
		s.Close()
		return nil, err
	}
	s.delay, err = delay.NewDispatcher(delay.Config{
		DB:        db,
		Timer:     timerOf(s.rabbit),
		Redis:     rdb,
		KeyPrefix: cfg.Delay.KeyPrefix,
		// Due together, orderTimeoutClose tasks close their orders in one
		// batch (one lock pipeline, one transaction), not one by one.
		BatchHandlers: map[string]delay.BatchHandlerFunc{
			delay.OrderTimeoutCloseHandler: delay.OrderCloseBatchHandler(closeOrdersForTasks(s.closer)),
		},
		Services:       services,
		ServiceToken:   cfg.Delay.ServiceToken,
		RunningTimeout: cfg.Delay.RunningTimeout,
		HandlerTimeout: cfg.Delay.HandlerTimeout,
		// An order close cut by the handler timeout finishes its page.
		HandlerGrace:      s.closer.CancelBound(),
		NotNowBackoff:     cfg.Delay.NotNowBackoff,
		NotNowBackoffMax:  cfg.Delay.NotNowBackoffMax,
		NotNowMaxAge:      cfg.Delay.NotNowMaxAge,
		ReconcileInterval: cfg.Delay.ReconcileInterval,
		Retention:         cfg.Delay.Retention,
		Logger:            logger.With("component", "delay"),
		Observer:          o.delay,
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("delayed tasks: %w", err)
	}
	return s, nil
}

func (s *services) handlerDeps() *handlers.Deps {
	return &handlers.Deps{Closer: s.closer, Dispatcher: s.delay, Lifecycle: s.lifecycle}
}

// startRabbitTimer builds and starts the RabbitMQ timer when delay.timer
// says so (nil otherwise). A broker that does not answer is logged, not an
// error: the timer keeps trying, readiness fails meanwhile, and tasks wait
// in the table for the reconciler.
func startRabbitTimer(ctx context.Context, cfg *config.Config, db *sqlx.DB, logger *slog.Logger) (*delay.RabbitMQTimer, error) {
	if cfg.Delay.Timer != "rabbitmq" {
		return nil, nil
	}
	r := cfg.Delay.RabbitMQ
	rt, err := delay.NewRabbitMQTimer(delay.RabbitMQConfig{URL: r.URL, Prefix: r.Prefix, Prefetch: r.Prefetch,
		RepublishAfter: r.RepublishAfter, DB: db, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("delay.rabbitmq: %w", err)
	}
	if err := rt.Start(ctx); err != nil {
		return nil, fmt.Errorf("delay.rabbitmq: %w", err)
	}
	return rt, nil
}

// timerOf is rt as a delay.Timer: nil (the Redis timer) when rt is nil.
func timerOf(rt *delay.RabbitMQTimer) delay.Timer {
	if rt == nil {
		return nil
	}
	return rt
}

// Close stops the RabbitMQ timer, closes Redis, then the database.
func (s *services) Close() error {
	var errs []error
	if s.rabbit != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, s.rabbit.Stop(ctx))
		cancel()
	}
	for _, n := range s.lockNodes {
		errs = append(errs, n.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// executorConfig copies the XXL-JOB part of the configuration.
func executorConfig(cfg *config.Config, logger *slog.Logger) xxljob.Config {
	x := cfg.XXL.Job
	return xxljob.Config{
		AdminAddresses:          x.Admin.Addresses,
		AccessToken:             x.AccessToken,
		AdminVersion:            xxljob.AdminVersion(x.Admin.Version), // checked by the loader
		AppName:                 x.Executor.AppName,
		Address:                 x.Executor.Address,
		IP:                      x.Executor.IP,
		IPExclude:               x.Executor.IPExclude,
		Port:                    x.Executor.Port,
		ListenAddr:              x.Executor.BindAddr,
		LogPath:                 x.Executor.LogPath,
		LogRetentionDays:        x.Executor.LogRetentionDays,
		ShutdownTimeout:         x.Executor.ShutdownTimeout,
		HTTPClientTimeout:       x.Admin.Timeout,
		AdminCAFile:             x.Admin.TLS.CAFile,
		AdminInsecureSkipVerify: x.Admin.TLS.InsecureSkipVerify,
		LogReadLimit:            int64(x.Executor.LogReadLimit),
		CallbackQueueSize:       x.Executor.CallbackQueueSize,
		Logger:                  logger, // xxljob tags its parts with "component" itself
	}
}
