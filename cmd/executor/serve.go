package main

import (
	"context"
	"errors"
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

func init() {
	register(command{
		name:    "serve",
		summary: "register with the admin and serve the XXL-JOB protocol and the API port",
		run:     cmdServe,
	})
}

func cmdServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "serve")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, env.stdout)
	logger.Info("starting executor", "config", cfg, "build", buildInfo())
	logNotices(logger, cfg)
	if cfg.XXL.Job.Executor.Enabled && cfg.XXL.Job.AccessToken == "" {
		logger.Warn("xxl.job.accessToken is EMPTY: anyone who reaches the executor port can trigger jobs; set XXL_JOB_ACCESS_TOKEN to the admin's token")
	}
	if cfg.API.Addr != "" && cfg.API.Token == "" {
		logger.Warn("api.token is EMPTY: the API port answers anyone who reaches it; set EXECUTOR_API_TOKEN")
	}

	b := readBuild()
	m := metrics.New(metrics.Config{Logger: logger, Version: b.Version, Commit: b.Commit})
	svc, err := openDeps(ctx, cfg, logger, depsObservers(m))
	if err != nil {
		return err
	}
	defer svc.Close()
	parts, err := serveParts(cfg, logger, m, svc)
	if err != nil {
		return err
	}
	started, err := startParts(ctx, parts)
	if err != nil {
		stopParts(context.WithoutCancel(ctx), started, logger)
		return err
	}
	logger.Info("executor serving", "appname", cfg.XXL.Job.Executor.AppName, "xxl_job", cfg.XXL.Job.Executor.Enabled)

	<-ctx.Done()
	logger.Info("shutting down")
	// A fresh deadline: the root context is already cancelled. Running jobs
	// get ShutdownTimeout, callbacks and servers a little more.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.XXL.Job.Executor.ShutdownTimeout+15*time.Second)
	defer cancel()
	if err := stopParts(sctx, started, logger); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// part is one long-lived component of serve. Parts start in order and stop
// in reverse, so the XXL-JOB executor (last to start) deregisters and drains
// first, the delayed-task dispatcher stops before the outbox relay that
// delivers what its closes wrote, and the API port answers probes until the
// end.
type part struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

// serveParts builds the parts the configuration turns on.
func serveParts(cfg *config.Config, logger *slog.Logger, m *metrics.Metrics, svc *services) ([]part, error) {
	var parts []part
	var exec *xxljob.Executor
	reg := &registryWatch{}
	if cfg.XXL.Job.Executor.Enabled {
		xcfg := executorConfig(cfg, logger)
		xcfg.Observer = xxlObservers{reg, m.XXLJob()}
		var err error
		if exec, err = xxljob.New(xcfg); err != nil {
			return nil, err
		}
		if err := handlers.Register(exec, svc.handlerDeps()); err != nil {
			return nil, err
		}
	}
	watchServe(m, exec, svc)

	if cfg.API.Addr != "" {
		apiSrv := api.New(api.Config{Addr: cfg.API.Addr, Token: cfg.API.Token, TokenHeader: cfg.API.TokenHeader,
			Pprof: cfg.API.Pprof, Logger: logger})
		// What the API port's own routes need. The admin registration is not
		// one of them: an admin outage must not take the delayed-task API
		// out of a load balancer. Probes that want it ask /readyz?registry=1.
		apiSrv.AddReadyCheck("mysql", func(ctx context.Context) error { return svc.db.PingContext(ctx) })
		apiSrv.AddReadyCheck("redis", func(ctx context.Context) error { return svc.rdb.Ping(ctx).Err() })
		if svc.rabbit != nil {
			// The timer: while it is down, new tasks wait in the table.
			apiSrv.AddReadyCheck("rabbitmq", svc.rabbit.Check)
		}
		if exec != nil {
			apiSrv.AddOptionalReadyCheck("registry", reg.check)
		}
		apiSrv.HandlePublic("GET /metrics", m.Handler())
		apiSrv.MountDelayTasks(svc.delay.Client())
		apiSrv.MountDeadLetters(deadletters.New(svc.db))
		apiSrv.MountOutbox(orders.NewOutbox(svc.db))
		apiSrv.MountRefunds(orders.NewRefunds(svc.db))
		if err := mountConsole(apiSrv, cfg, svc, logger); err != nil {
			return nil, err
		}
		parts = append(parts, part{"api", func(context.Context) error { return apiSrv.Start() }, apiSrv.Shutdown})
	}
	if svc.relay != nil {
		parts = append(parts, part{"outbox relay", svc.relay.Start, svc.relay.Stop})
	}
	if cfg.Delay.Enabled {
		parts = append(parts, part{"delayed tasks", svc.delay.Start, svc.delay.Stop})
	}
	if exec != nil {
		parts = append(parts, part{"xxl-job executor", func(ctx context.Context) error {
			if err := exec.Start(ctx); err != nil {
				return err
			}
			logger.Info("xxl-job protocol serving", "addr", exec.Addr().String())
			return nil
		}, exec.Shutdown})
	}
	return parts, nil
}

// mountConsole mounts the operator console on the API port unless
// api.console is false; without consoleTokens it is mounted to say why it
// is off.
func mountConsole(srv *api.Server, cfg *config.Config, svc *services, logger *slog.Logger) error {
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
	err := srv.MountConsole(api.ConsoleConfig{Operators: ops, Session: cfg.API.ConsoleSession, DB: svc.db,
		Tasks: svc.delay.Client(), Mode: svc.compensation})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	logger.Info("operator console on the API port", "path", "/console/", "operators", len(ops))
	return nil
}

// startParts starts parts in order and returns those started; on an error
// the caller stops them.
func startParts(ctx context.Context, parts []part) ([]part, error) {
	for i, p := range parts {
		if err := p.start(ctx); err != nil {
			return parts[:i], err
		}
	}
	return parts, nil
}

// stopParts stops parts in reverse order, every one even when some fail.
func stopParts(ctx context.Context, parts []part, logger *slog.Logger) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if err := parts[i].stop(ctx); err != nil {
			logger.Error("stop "+parts[i].name, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logNotices logs what the configuration says about itself (keys of a Java
// executor that work differently here).
func logNotices(logger *slog.Logger, cfg *config.Config) {
	for _, n := range cfg.Notices() {
		logger.Log(context.Background(), n.Level, n.Msg)
	}
}
