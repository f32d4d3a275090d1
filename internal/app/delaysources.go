package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/orders"
)

// This file wires the delayed tasks of order.sources: a task registered in
// an order's transaction lives in that order's database, so every order
// database has its own dispatcher over its own job_delay_task, with timer
// names of its own, and closes orderTimeoutClose tasks in its own tables.
// mysql.dsn's database keeps the dispatcher and timer names it always had,
// also serving the sources that are on it.

// DelayKeys are the timer names of one database's delayed tasks.
type DelayKeys struct {
	KeyPrefix      string // the Redis timer's keys
	RabbitMQPrefix string // the RabbitMQ timer's exchange and queues
}

// DelayKeysOf are the timer names of the tasks in src's database:
// delay.keyPrefix and delay.rabbitmq.prefix for mysql.dsn's database (the
// default source, or a source on that database), else names of the
// source's own (delay.SourceKeyPrefix, delay.SourceRabbitMQPrefix), of
// the first source on that database when several share it, as the
// dispatchers are built.
func DelayKeysOf(cfg *config.Config, src config.Source) DelayKeys {
	if cfg.OnHomeDatabase(src) {
		return sourceKeys(cfg, "")
	}
	dsn, _ := src.MySQL.NormalizedDSN()
	sources, _ := cfg.Sources() // checked by the loader
	for _, s := range sources {
		if d, _ := s.MySQL.NormalizedDSN(); d == dsn {
			return sourceKeys(cfg, s.Name)
		}
	}
	return sourceKeys(cfg, src.Name)
}

// sourceKeys are the timer names of the tasks of the order database first
// named by source; "" is mysql.dsn's.
func sourceKeys(cfg *config.Config, source string) DelayKeys {
	keys := DelayKeys{KeyPrefix: cfg.Delay.KeyPrefix, RabbitMQPrefix: cfg.Delay.RabbitMQ.Prefix}
	if source == "" {
		return keys
	}
	return DelayKeys{KeyPrefix: delay.SourceKeyPrefix(keys.KeyPrefix, source),
		RabbitMQPrefix: delay.SourceRabbitMQPrefix(keys.RabbitMQPrefix, source)}
}

// orderDatabase is one database of order.sources with its units; sources
// on the same database share it, named by the first.
type orderDatabase struct {
	sourceDB
	units []*orders.Closer
}

// orderDatabases groups units by database, in the configured order;
// dbs are OpenUnits' pools.
func orderDatabases(cfg *config.Config, home *sqlx.DB, dbs []*sqlx.DB, units []*orders.Closer) ([]*orderDatabase, error) {
	if len(cfg.Order.Sources) == 0 {
		return nil, nil
	}
	sdbs, err := sourceDBs(cfg, home, dbs)
	if err != nil {
		return nil, err
	}
	var out []*orderDatabase
	byDSN := map[string]*orderDatabase{}
	bySource := map[string]*orderDatabase{}
	for _, s := range sdbs {
		odb := byDSN[s.dsn]
		if odb == nil {
			odb = &orderDatabase{sourceDB: s}
			byDSN[s.dsn] = odb
			out = append(out, odb)
		}
		bySource[s.name] = odb
	}
	for _, u := range units {
		if odb := bySource[u.Source()]; odb != nil {
			odb.units = append(odb.units, u)
		}
	}
	return out, nil
}

// closeTables are the order tables the orderTimeoutClose tasks of one
// database close in: def (order.schema.table's Closer; nil when the
// database need not hold that table) and units, the first Closer of a
// table winning.
func closeTables(def *orders.Closer, defTable string, units []*orders.Closer) handlers.OrderCloseTables {
	ot := handlers.OrderCloseTables{Default: defTable, Close: map[string]delay.BatchHandlerFunc{}}
	if def != nil {
		ot.Close[defTable] = OrderCloseBatchHandler(def)
	}
	for _, u := range units {
		if _, ok := ot.Close[u.Table()]; !ok {
			ot.Close[u.Table()] = OrderCloseBatchHandler(u)
		}
	}
	return ot
}

// delaySource is the delayed tasks of an order database other than
// mysql.dsn's: its dispatcher (built, not started: serve starts it) and,
// with delay.timer rabbitmq, its RabbitMQ timer (started by Open, stopped
// by Close).
type delaySource struct {
	name   string
	dsn    string // normalized
	delay  *delay.Dispatcher
	rabbit *delay.RabbitMQTimer
}

// buildDelaySources builds a delaySource for each order database other
// than mysql.dsn's and returns the tables of the units on mysql.dsn's
// database, which its own dispatcher serves. What it built before an
// error is in d, for Close.
func (d *Deps) buildDelaySources(ctx context.Context, w delayWiring) (homeUnits []*orders.Closer, err error) {
	dbs, err := orderDatabases(w.cfg, d.db, d.unitDBs, d.units)
	if err != nil {
		return nil, err
	}
	for _, odb := range dbs {
		if odb.home {
			homeUnits = append(homeUnits, odb.units...)
			continue
		}
		keys := sourceKeys(w.cfg, odb.name)
		src := &delaySource{name: odb.name, dsn: odb.dsn}
		log := w.logger.With("source", odb.name)
		if src.rabbit, err = StartRabbitMQTimer(ctx, w.cfg, odb.db, keys.RabbitMQPrefix, log); err != nil {
			return nil, fmt.Errorf("order source %s: %w", odb.name, err)
		}
		d.delaySources = append(d.delaySources, src)
		// A task without a table means order.schema.table, which only
		// the home database is sure to hold.
		tables := closeTables(nil, w.defaultTable, odb.units)
		if src.delay, err = w.dispatcher(odb.db, src.rabbit, keys.KeyPrefix, tables, log); err != nil {
			return nil, fmt.Errorf("order source %s: delayed tasks: %w", odb.name, err)
		}
	}
	return homeUnits, nil
}

// sourceDispatchers are the dispatchers of the other order databases, for
// the sweep job.
func (d *Deps) sourceDispatchers() []handlers.SourceDispatcher {
	out := make([]handlers.SourceDispatcher, 0, len(d.delaySources))
	for _, s := range d.delaySources {
		out = append(out, handlers.SourceDispatcher{Source: s.name, Dispatcher: s.delay})
	}
	return out
}

// sourcedTasks are the clients of every order database's dispatcher, for
// the delayed-task API's ?source=: mysql.dsn's serves a request without
// it and the sources on its database, each other source the dispatcher of
// its database.
func (d *Deps) sourcedTasks(cfg *config.Config) (api.Sourced[*delay.Client], error) {
	home := d.delay.Client()
	sdbs, err := sourceDBs(cfg, d.db, d.unitDBs)
	if err != nil {
		return api.Sourced[*delay.Client]{}, err
	}
	byDSN := map[string]*delay.Client{}
	for _, s := range d.delaySources {
		byDSN[s.dsn] = s.delay.Client()
	}
	out := api.Sourced[*delay.Client]{Home: home, By: map[string]*delay.Client{}}
	for _, s := range sdbs {
		if s.home {
			out.By[s.name] = home
		} else if c := byDSN[s.dsn]; c != nil {
			out.By[s.name] = c
		}
	}
	return out, nil
}

// delayComponents are the delayed-task dispatchers serve runs: mysql.dsn's,
// then each other order database's, which starts late when its database
// does not answer (lateStart) so that one source down does not stop the
// others' dispatchers.
func (d *Deps) delayComponents(logger *slog.Logger) []namedComponent {
	out := []namedComponent{{"delayed tasks", d.delay}}
	for _, s := range d.delaySources {
		name := "delayed tasks of order source " + s.name
		out = append(out, namedComponent{name, &lateStart{name: name, c: s.delay, log: logger, every: 10 * time.Second}})
	}
	return out
}

// lateStart is a Component whose Start does not fail when its component
// cannot start now (a dispatcher whose database does not answer): it logs
// that and tries again every `every` in the background until the
// component starts or Stop.
type lateStart struct {
	name  string
	c     Component
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	cancel  context.CancelFunc // of the retries; nil when none run
	done    chan struct{}      // closed when the retries end
	begun   bool               // a Start after Start or Stop fails,
	stopped bool               // as the components' own do
}

// startTimeout bounds each try, so a database that does not answer holds
// serve's start-up for this long at most.
const startTimeout = 5 * time.Second

func (s *lateStart) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.begun || s.stopped {
		return fmt.Errorf("app: %s already started or stopped", s.name)
	}
	s.begun = true
	err := s.try(ctx)
	if err == nil || ctx.Err() != nil {
		return err
	}
	s.log.WarnContext(ctx, s.name+" could not start; trying again in the background", "every", s.every.String(), "err", err)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel, s.done = cancel, make(chan struct{})
	go s.retry(rctx, s.done)
	return nil
}

func (s *lateStart) try(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return s.c.Start(tctx)
}

func (s *lateStart) retry(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.try(ctx); err == nil {
			s.log.InfoContext(ctx, s.name+" started")
			return
		} else if ctx.Err() == nil {
			s.log.DebugContext(ctx, s.name+" could not start yet", "err", err)
		}
	}
}

// Stop ends the retries, then stops the component (safe whether it
// started or not).
func (s *lateStart) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	return s.c.Stop(ctx)
}
