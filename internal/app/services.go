package app

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
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/xxljob"
)

// Deps are the connections and domain objects a process shares: what
// `executor serve` serves and `executor run` runs a handler on.
type Deps struct {
	db        *sqlx.DB
	rdb       redis.UniversalClient
	lockNodes []redis.UniversalClient
	closer    *orders.Closer
	units     []*orders.Closer     // orderTimeoutCloseJob's: closer, or one per table of order.sources
	retry     []*orders.Closer     // deadLetterRetryJob's (RetryUnits)
	unitDBs   []*sqlx.DB           // the databases of order.sources
	sources   []sourceDB           // the order sources with their pools (sourceDBs); none without order.sources
	delay     *delay.Dispatcher    // mysql.dsn's database's; built, not started: serve starts it
	rabbit    *delay.RabbitMQTimer // delay.timer rabbitmq: started by Open (it connects in the background), stopped by Close
	// delaySources are the delayed tasks of the other order databases
	// (order.sources), as delay and rabbit (delaysources.go).
	delaySources []*delaySource
	relays       []sourceRelay     // outbox compensation only, one per order database; built, not started: serve starts them
	lifecycle    *lifecycle.Jobs   // orderAutoConfirmJob, orderFulfillmentTimeoutJob without order.sources
	lifeUnits    []*lifecycle.Jobs // theirs with order.sources: one per table
	// noLifecycle says why lifecycle is nil (a declared order.schema).
	noLifecycle error
	// compensation is where closes give stock and coupons back.
	compensation orders.CompensationMode
}

// Open connects to MySQL and Redis, checks the database and builds the
// close path, the lifecycle jobs and the delayed-task dispatcher (not
// started). obs are the metrics hooks (the zero value: none). Close
// releases what Open made.
func Open(ctx context.Context, cfg *config.Config, logger *slog.Logger, obs Observers) (*Deps, error) {
	db, err := OpenDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkDatabase(ctx, cfg, db, logger); err != nil {
		db.Close()
		return nil, err
	}
	d := &Deps{db: db}
	if err := d.build(ctx, cfg, logger, obs); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// build makes the rest of d on its database; what it made before an error
// is closed by Close.
func (d *Deps) build(ctx context.Context, cfg *config.Config, logger *slog.Logger, obs Observers) error {
	var err error
	if d.rdb, err = NewRedis(cfg.Redis); err != nil {
		return err
	}
	if err := CheckRedisDB(ctx, cfg.Redis, d.rdb); err != nil {
		return err
	}
	if d.lockNodes, err = newLockNodes(cfg.Redis); err != nil {
		return err
	}
	cp, err := NewClosePath(ctx, d.db, d.rdb, d.lockNodes, cfg, logger, obs.Orders)
	if err != nil {
		return err
	}
	d.closer, d.compensation = cp.Closer, cp.Compensation
	var newLifecycle func(*sqlx.DB, dbserver.Server, string, string) (*lifecycle.Jobs, error)
	if d.noLifecycle = lifecycleOff(cfg, logger); d.noLifecycle == nil {
		newLifecycle = lifecycleBuilder(cfg, logger, obs.Lifecycle)
	}
	units, err := OpenUnits(ctx, cfg, cp, newLifecycle, logger)
	d.units, d.lifeUnits, d.unitDBs = units.Closers, units.Lifecycle, units.DBs
	if err != nil {
		return err
	}
	if len(cfg.Order.Sources) > 0 {
		if d.sources, err = sourceDBs(cfg, d.db, d.unitDBs); err != nil {
			return err
		}
	}
	if d.retry, err = RetryUnits(cfg, d.closer, d.units); err != nil {
		return err
	}
	if d.relays, err = newRelays(cfg, d.db, d.unitDBs, logger); err != nil {
		return err
	}
	if newLifecycle != nil && len(cfg.Order.Sources) == 0 {
		// The one unit: mysql.dsn's order table, as before order.sources.
		if d.lifecycle, err = newLifecycle(d.db, cp.Server, lifecycle.DefaultSource, ""); err != nil {
			return err
		}
	}
	services, err := delay.ParseServices(cfg.Delay.Services)
	if err != nil {
		return fmt.Errorf("delay.services: %w", err)
	}
	w := delayWiring{cfg: cfg, services: services, rdb: d.rdb, defaultTable: d.closer.Table(),
		grace: d.closer.CancelBound(), logger: logger, obs: obs.Delay}
	homeUnits, err := d.buildDelaySources(ctx, w)
	if err != nil {
		return err
	}
	if d.rabbit, err = StartRabbitMQTimer(ctx, cfg, d.db, cfg.Delay.RabbitMQ.Prefix, logger); err != nil {
		return err
	}
	d.delay, err = w.dispatcher(d.db, d.rabbit, cfg.Delay.KeyPrefix, closeTables(d.closer, w.defaultTable, homeUnits), logger)
	if err != nil {
		return fmt.Errorf("delayed tasks: %w", err)
	}
	return nil
}

// delayWiring is what every database's delayed-task dispatcher shares.
type delayWiring struct {
	cfg          *config.Config
	services     map[string]string
	rdb          redis.UniversalClient
	defaultTable string        // order.schema.table
	grace        time.Duration // the close path's cancellation bound
	logger       *slog.Logger
	obs          delay.Observer
}

// dispatcher builds the dispatcher of db's job_delay_task, timed by rt
// (delay.timer rabbitmq) or by the Redis timer under keyPrefix, closing
// orderTimeoutClose tasks in tables.
func (w delayWiring) dispatcher(db *sqlx.DB, rt *delay.RabbitMQTimer, keyPrefix string, tables handlers.OrderCloseTables,
	logger *slog.Logger) (*delay.Dispatcher, error) {
	cfg := w.cfg
	return delay.NewDispatcher(db, w.rdb, delay.Config{
		Timer:       TimerOf(rt),
		KeyPrefix:   keyPrefix,
		TimerShards: cfg.Delay.TimerShards,
		// Due together, orderTimeoutClose tasks close their orders in one
		// batch per table (one lock pipeline, one transaction), not one by
		// one.
		BatchHandlers: map[string]delay.BatchHandlerFunc{
			delay.OrderTimeoutCloseHandler: handlers.DelayOrderCloseTables(tables),
		},
		// A task without an order, or in a table the database does not
		// hold, is refused at registration.
		PayloadValidators: map[string]delay.PayloadValidator{
			delay.OrderTimeoutCloseHandler: tables.Validate,
		},
		Services:       w.services,
		ServiceToken:   cfg.Delay.ServiceToken,
		RunningTimeout: cfg.Delay.RunningTimeout,
		HandlerTimeout: cfg.Delay.HandlerTimeout,
		// An order close cut by the handler timeout finishes its page.
		HandlerGrace:      w.grace,
		NotNowBackoff:     cfg.Delay.NotNowBackoff,
		NotNowBackoffMax:  cfg.Delay.NotNowBackoffMax,
		NotNowMaxAge:      cfg.Delay.NotNowMaxAge,
		ReconcileInterval: cfg.Delay.ReconcileInterval,
		BatchSize:         cfg.Delay.BatchSize,
		Retention:         cfg.Delay.Retention,
		Logger:            logger, // delay tags its parts with "component" itself
		Observer:          w.obs,
	})
}

// HandlerDeps is what the XXL-JOB handlers run on.
func (d *Deps) HandlerDeps() *handlers.Deps {
	return &handlers.Deps{Closer: d.closer, Units: d.units, RetryUnits: d.retry, Dispatcher: d.delay,
		DelaySources: d.sourceDispatchers(), Lifecycle: d.lifecycle, LifecycleUnits: d.lifeUnits,
		NoLifecycle: d.noLifecycle}
}

// ClosePath is the order close as serve and run build it from the
// configuration: the closer with its page locker, payment step and
// compensation mode (outbox mode's relays are the Deps': relays.go).
type ClosePath struct {
	Closer       *orders.Closer
	Compensation orders.CompensationMode
	Server       dbserver.Server // what mysql.dsn's database is
	// NewUnit builds the Closer of one unit of order.sources, on its own
	// database, with Closer's settings and locks (units.go).
	NewUnit func(db *sqlx.DB, server dbserver.Server, source, table string) (*orders.Closer, error)
}

// NewClosePath builds the close path on db, with the page locks on rdb and,
// when cfg names lock nodes, on their clients (Redlock). It asks the server
// what it is (dbserver.DetectServer) for the close path's error classes.
// obs may be nil.
func NewClosePath(ctx context.Context, db *sqlx.DB, rdb redis.UniversalClient, lockNodes []redis.UniversalClient, cfg *config.Config,
	logger *slog.Logger, obs orders.Observer) (ClosePath, error) {
	server, err := dbserver.DetectServer(ctx, db)
	if err != nil {
		return ClosePath{}, fmt.Errorf("order closer: %w", err)
	}
	logger.Info("database server", "kind", server.String())
	locker, err := orderlock.New(orderlock.Config{
		Client:   rdb,
		Nodes:    lockNodes,
		Prefix:   cfg.Order.Close.LockKeyPrefix,
		TTL:      cfg.Order.Close.LockTTL,
		Observer: obs,
	})
	if err != nil {
		return ClosePath{}, fmt.Errorf("order locks: %w", err)
	}
	ext, err := newCloseExtensions(cfg, logger)
	if err != nil {
		return ClosePath{}, err
	}
	sch, err := cfg.Order.Schema.Schema() // checked by the loader
	if err != nil {
		return ClosePath{}, fmt.Errorf("order.schema: %w", err)
	}
	ccfg := orders.CloserConfig{
		Schema:       sch,
		Logger:       logger, // NewCloser tags its lines itself
		PageSize:     cfg.Order.Close.PageSize,
		TradeCloser:  ext.tradeCloser,
		Compensation: ext.compensation,
		Server:       server,
		Observer:     obs,
		RunRetention: cfg.Order.Close.RunRetention,
		// deadLetterRetryJob and the close sweep share the retry policy.
		DeadLetterBackoff: orders.DeadLetterBackoff{Base: cfg.Order.DeadLetter.BaseBackoff,
			Max: cfg.Order.DeadLetter.MaxBackoff, ParkAfter: cfg.Order.DeadLetter.MaxAttempts},
	}
	closer, err := orders.NewCloser(db, locker, ccfg)
	if err != nil {
		return ClosePath{}, fmt.Errorf("order closer: %w", err)
	}
	return ClosePath{Closer: closer, Compensation: ext.compensation, Server: server,
		NewUnit: unitBuilder(cfg, locker, ccfg, logger)}, nil
}

// StartRabbitMQTimer builds and starts the RabbitMQ timer of db's tasks,
// its names starting with prefix (DelayKeysOf), when delay.timer says so
// (nil otherwise). A broker that does not answer is logged, not an
// error: the timer keeps trying, readiness fails meanwhile, and tasks wait
// in the table for the reconciler.
func StartRabbitMQTimer(ctx context.Context, cfg *config.Config, db *sqlx.DB, prefix string, logger *slog.Logger) (*delay.RabbitMQTimer, error) {
	if cfg.Delay.Timer != "rabbitmq" {
		return nil, nil
	}
	r := cfg.Delay.RabbitMQ
	rt, err := delay.NewRabbitMQTimer(db, delay.RabbitMQConfig{URL: r.URL, Prefix: prefix, Prefetch: r.Prefetch,
		RepublishAfter: r.RepublishAfter, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("delay.rabbitmq: %w", err)
	}
	if err := rt.Start(ctx); err != nil {
		return nil, fmt.Errorf("delay.rabbitmq: %w", err)
	}
	return rt, nil
}

// TimerOf is rt as a delay.Timer: nil (the Redis timer) when rt is nil.
func TimerOf(rt *delay.RabbitMQTimer) delay.Timer {
	if rt == nil {
		return nil
	}
	return rt
}

// Close stops the RabbitMQ timers, closes Redis, then the databases.
func (d *Deps) Close() error {
	var errs []error
	rabbits := []*delay.RabbitMQTimer{d.rabbit}
	for _, s := range d.delaySources {
		rabbits = append(rabbits, s.rabbit)
	}
	for _, rt := range rabbits {
		if rt != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs = append(errs, rt.Stop(ctx))
			cancel()
		}
	}
	for _, n := range d.lockNodes {
		errs = append(errs, n.Close())
	}
	if d.rdb != nil {
		errs = append(errs, d.rdb.Close())
	}
	for _, db := range d.unitDBs {
		errs = append(errs, db.Close())
	}
	if d.db != nil {
		errs = append(errs, d.db.Close())
	}
	return errors.Join(errs...)
}

// ExecutorConfig copies the XXL-JOB part of the configuration.
func ExecutorConfig(cfg *config.Config, logger *slog.Logger) xxljob.Config {
	x := cfg.XXL.Job
	return xxljob.Config{
		AdminAddresses:          x.Admin.Addresses,
		AccessToken:             x.AccessToken,
		OpenWithoutToken:        x.Executor.OpenWithoutToken,
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
