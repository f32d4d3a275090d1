package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/deadletters"
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
	if cfg.XXL.Job.Executor.Enabled && cfg.XXL.Job.AccessToken == "" {
		logger.Warn("xxl.job.accessToken is EMPTY: anyone who reaches the executor port can trigger jobs; set XXL_JOB_ACCESS_TOKEN to the admin's token")
	}
	if cfg.API.Addr != "" && cfg.API.Token == "" {
		logger.Warn("api.token is EMPTY: the API port answers anyone who reaches it; set EXECUTOR_API_TOKEN")
	}
	m := metrics.New(metrics.Config{Logger: logger, Version: b.Version, Commit: b.Commit})
	d, err := Open(ctx, cfg, logger, MetricsObservers(m))
	if err != nil {
		return err
	}
	defer d.Close()
	cs, err := serveComponents(cfg, logger, m, d)
	if err != nil {
		return err
	}
	if err := cs.Start(ctx); err != nil {
		return err
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

// serveComponents builds the components the configuration turns on, in
// the order they start: the API port first, so it answers probes until the
// end; the outbox relay before the delayed-task dispatcher, so it still
// delivers what the dispatcher's last closes wrote; the XXL-JOB executor
// last, so it deregisters and drains first.
func serveComponents(cfg *config.Config, logger *slog.Logger, m *metrics.Metrics, d *Deps) (*Components, error) {
	cs := NewComponents(logger)
	var exec *xxljob.Executor
	reg := &registryWatch{}
	if cfg.XXL.Job.Executor.Enabled {
		xcfg := ExecutorConfig(cfg, logger)
		xcfg.Observer = xxlObservers{reg, m.XXLJob()}
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
	if d.relay != nil {
		cs.Add("outbox relay", d.relay)
	}
	if cfg.Delay.Enabled {
		cs.Add("delayed tasks", d.delay)
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
		Pprof: cfg.API.Pprof, Logger: logger})
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
	srv.HandlePublic("GET /metrics", m.Handler())
	srv.MountDelayTasks(d.delay.Client())
	srv.MountDeadLetters(deadletters.New(d.db))
	srv.MountOutbox(orders.NewOutbox(d.db))
	srv.MountRefunds(orders.NewRefunds(d.db))
	if err := mountConsole(srv, cfg, d, logger); err != nil {
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
func mountConsole(srv *api.Server, cfg *config.Config, d *Deps, logger *slog.Logger) error {
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
	err := srv.MountConsole(api.ConsoleConfig{Operators: ops, Session: cfg.API.ConsoleSession, DB: d.db,
		Tasks: d.delay.Client(), Mode: d.compensation})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	logger.Info("operator console on the API port", "path", "/console/", "operators", len(ops))
	return nil
}
