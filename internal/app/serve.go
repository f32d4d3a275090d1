package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
	"github.com/orderjob/executor/xxljob"
)

// Build names the binary, for the metrics' build information.
type Build struct {
	Version string
	Commit  string
}

// Serve is `executor serve`: it opens the dependencies, starts the
// components cfg turns on and serves until ctx is done; then it stops
// them under a fresh deadline and closes the dependencies.
func Serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, b Build) error {
	if err := CheckOpen(cfg); err != nil {
		return err
	}
	if cfg.API.Addr != "" && cfg.API.Token == "" {
		logger.Warn("api.token is EMPTY: the API port answers anyone who reaches it; set EXECUTOR_API_TOKEN")
	}
	m := metrics.New(metrics.Config{Logger: logger, Version: b.Version, Commit: b.Commit})
	d, err := Open(ctx, cfg, logger, MetricsObservers(m))
	if err != nil {
		return stoppedDuringStart(ctx, logger, err)
	}
	defer d.Close()
	cs, err := serveComponents(cfg, logger, m, d)
	if err != nil {
		return err
	}
	if err := cs.Start(ctx); err != nil {
		return stoppedDuringStart(ctx, logger, err) // Start stopped what it had started
	}
	logger.Info("executor serving", "appname", cfg.XXL.Job.Executor.AppName, "xxl_job", cfg.XXL.Job.Executor.Enabled)

	<-ctx.Done()
	logger.Info("shutting down")
	// A fresh deadline: the root context is already cancelled. Running jobs
	// get ShutdownTimeout, callbacks and servers a little more.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.XXL.Job.Executor.ShutdownTimeout+15*time.Second)
	defer cancel()
	if err := cs.Stop(sctx); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// stoppedDuringStart is err, unless it only says that the start was cut
// short by the stop signal (ctx done): a stop asked for during start-up is
// a clean stop, not a failure to report with exit status 1.
func stoppedDuringStart(ctx context.Context, logger *slog.Logger, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		logger.Info("stopped during start-up", "cause", err.Error())
		return nil
	}
	return err
}

// ErrNoAccessToken is why serve refuses to start with the XXL-JOB side on
// and no access token, unless xxl.job.executor.openWithoutToken says so.
var ErrNoAccessToken = errors.New("xxl.job.accessToken (XXL_JOB_ACCESS_TOKEN) is empty: anyone who reaches the executor port " +
	"could run and kill jobs and read run logs. Set it to the admin's token (on the branch after 3.4: the executor group's), " +
	"or set xxl.job.executor.openWithoutToken: true (XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN=true) to serve without one, " +
	"on 127.0.0.1 unless xxl.job.executor.bindAddr is set (docs/security.md)")

// CheckOpen refuses an executor port without an access token unless the
// configuration asks for one explicitly. xxljob.New refuses it too; this
// names the settings and comes before any connection is opened. The
// warning about an open port is xxljob's own, logged at its start.
func CheckOpen(cfg *config.Config) error {
	if cfg.XXL.Job.Executor.Enabled && cfg.XXL.Job.AccessToken == "" && !cfg.XXL.Job.Executor.OpenWithoutToken {
		return ErrNoAccessToken
	}
	return nil
}

// serveComponents builds the components the configuration turns on, in
// the order they start: the API port first, so it answers probes until the
// end; the outbox relays (one per order database, each stopped on its own)
// before the delayed-task dispatcher, so they still deliver what the
// dispatcher's last closes wrote; the XXL-JOB executor
// last, so it deregisters and drains first.
func serveComponents(cfg *config.Config, logger *slog.Logger, m *metrics.Metrics, d *Deps) (*Components, error) {
	cs := NewComponents(logger)
	var exec *xxljob.Executor
	reg := &registryWatch{}
	if cfg.XXL.Job.Executor.Enabled {
		xcfg := ExecutorConfig(cfg, logger)
		xcfg.Observer = xxlObservers{reg, newXXLMetrics(m)}
		if d.closer != nil {
			xcfg.InterruptedFunc = handlers.RecordInterrupted(d.closer)
		}
		var err error
		if exec, err = xxljob.New(xcfg); err != nil {
			return nil, err
		}
		if err := handlers.Register(exec, d.HandlerDeps()); err != nil {
			return nil, err
		}
	}
	watchServe(m, exec, d)

	if cfg.API.Addr != "" {
		apiSrv, err := newAPIServer(cfg, logger, m, d, exec, reg)
		if err != nil {
			return nil, err
		}
		cs.Add("api", apiSrv)
	}
	for _, r := range d.relays {
		cs.Add(relayComponentName(d.relays, r.Source), r.Relay)
	}
	if cfg.Delay.Enabled {
		for _, c := range d.delayComponents(logger) {
			cs.Add(c.name, c.Component)
		}
	}
	if exec != nil {
		cs.Add("xxl-job executor", xxlExecutor{exec, logger})
	}
	return cs, nil
}

// newAPIServer builds the API port with its readiness checks and routes;
// exec is nil when the XXL-JOB side is off.
func newAPIServer(cfg *config.Config, logger *slog.Logger, m *metrics.Metrics, d *Deps, exec *xxljob.Executor, reg *registryWatch) (*api.Server, error) {
	srv := api.New(api.Config{Addr: cfg.API.Addr, Token: cfg.API.Token, TokenHeader: cfg.API.TokenHeader,
		Pprof: cfg.API.Pprof, Logger: logger, AuthFailedFunc: m.AuthFailed})
	// What the API port's own routes need. The admin registration is not
	// one of them: an admin outage must not take the delayed-task API out
	// of a load balancer. Probes that want it ask /readyz?registry=1.
	srv.AddReadyCheck("mysql", func(ctx context.Context) error { return d.db.PingContext(ctx) })
	srv.AddReadyCheck("redis", func(ctx context.Context) error { return d.rdb.Ping(ctx).Err() })
	if len(d.lockNodes) > 0 {
		srv.AddReadyCheck("redis_lock_quorum", lockQuorumCheck(d.lockNodes))
	}
	if d.rabbit != nil {
		// The timer: while it is down, new tasks wait in the table.
		srv.AddReadyCheck("rabbitmq", d.rabbit.Check)
	}
	if exec != nil {
		srv.AddOptionalReadyCheck("registry", reg.check)
	}
	if others := otherDatabases(d.sources); len(others) > 0 {
		// Optional: one source's database down stops only its units'
		// closes, not the API port's routes.
		srv.AddOptionalReadyCheck("sources", sourcesCheck(others))
	}
	srv.HandlePublic("GET /metrics", m.Handler())
	tasks, err := d.sourcedTasks(cfg)
	if err != nil {
		return nil, err
	}
	srv.MountSourcedDelayTasks(tasks)
	srv.MountDeadLetters(sourcedViews(d.db, d.sources, deadletters.New))
	srv.MountOutbox(sourcedViews(d.db, d.sources, outbox.NewOps))
	srv.MountRefunds(sourcedViews(d.db, d.sources, refunds.New))
	if err := mountConsole(srv, cfg, d, tasks, logger); err != nil {
		return nil, err
	}
	return srv, nil
}

// xxlExecutor is the XXL-JOB executor as a Component, logging where it
// serves once started.
type xxlExecutor struct {
	*xxljob.Executor
	log *slog.Logger
}

func (x xxlExecutor) Start(ctx context.Context) error {
	if err := x.Executor.Start(ctx); err != nil {
		return err
	}
	x.log.Info("xxl-job protocol serving", "addr", x.Addr().String())
	return nil
}

// mountConsole mounts the operator console on the API port unless
// api.console is false; without consoleTokens it is mounted to say why it
// is off.
func mountConsole(srv *api.Server, cfg *config.Config, d *Deps, tasks api.Sourced[*delay.Client], logger *slog.Logger) error {
	if !cfg.API.Console {
		return nil
	}
	var ops []api.Operator
	for _, o := range cfg.API.ConsoleOperators() {
		ops = append(ops, api.Operator{Name: o.Name, Token: o.Token})
	}
	if len(ops) == 0 {
		logger.Warn("api.console is on but api.consoleTokens is empty: /console/ says it is off; set EXECUTOR_API_CONSOLE_TOKENS=name:token,...")
	}
	sch, err := cfg.Order.Schema.Schema()
	if err != nil {
		return fmt.Errorf("console: order.schema: %w", err)
	}
	sources, err := consoleSources(sch, d, tasks)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	// mysql.dsn's own order table: the one unit without order.sources, and
	// the table of the delayed-task closes there with them.
	err = srv.MountConsole(api.ConsoleConfig{Operators: ops, Session: cfg.API.ConsoleSession, DB: d.db,
		Due: []inspect.Unit{d.closer}, Sources: sources, Tasks: tasks.Home, Schema: sch, Mode: d.compensation})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	logger.Info("operator console on the API port", "path", "/console/", "operators", len(ops))
	return nil
}
