package main

import (
	"context"
	"errors"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/xxljob"
)

func init() {
	register(command{
		name:    "serve",
		summary: "register with the admin and serve the XXL-JOB protocol and the API port (default)",
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
	logger.Info("starting executor", "config", cfg)
	if cfg.XXL.Job.AccessToken == "" {
		logger.Warn("xxl.job.accessToken is EMPTY: anyone who reaches the executor port can trigger jobs; set XXL_JOB_ACCESS_TOKEN to the admin's token")
	}
	if cfg.API.Addr != "" && cfg.API.Token == "" {
		logger.Warn("api.token is EMPTY: the API port answers anyone who reaches it; set EXECUTOR_API_TOKEN")
	}

	m := metrics.New(metrics.Config{Logger: logger})
	svc, err := openDeps(ctx, cfg, logger, depsObservers(m))
	if err != nil {
		return err
	}
	defer svc.Close()

	reg := &registryWatch{}
	xcfg := executorConfig(cfg, logger)
	xcfg.Observer = xxlObservers{reg, m.XXLJob()}
	exec, err := xxljob.New(xcfg)
	if err != nil {
		return err
	}
	watchServe(m, exec, svc)
	if err := handlers.Register(exec, svc.handlerDeps()); err != nil {
		return err
	}

	var apiSrv *api.Server
	if cfg.API.Addr != "" {
		apiSrv = api.New(api.Config{Addr: cfg.API.Addr, Token: cfg.API.Token, TokenHeader: cfg.API.TokenHeader,
			Pprof: cfg.API.Pprof, Logger: logger.With("component", "api")})
		apiSrv.AddReadyCheck("mysql", func(ctx context.Context) error { return svc.db.PingContext(ctx) })
		apiSrv.AddReadyCheck("redis", func(ctx context.Context) error { return svc.rdb.Ping(ctx).Err() })
		apiSrv.AddReadyCheck("registry", reg.check)
		apiSrv.HandlePublic("GET /metrics", m.Handler())
		delay.NewAPI(svc.delay.Client(), logger.With("component", "delay.api")).Mount(apiSrv.Handle)
		mountDeadLetterAPI(apiSrv.Handle, svc.db, logger)
		if err := apiSrv.Start(); err != nil {
			return err
		}
	}
	if cfg.Delay.Enabled {
		if err := svc.delay.Start(ctx); err != nil {
			if apiSrv != nil {
				_ = apiSrv.Shutdown(context.Background())
			}
			return err
		}
	}
	if svc.relay != nil {
		_ = svc.relay.Start(ctx) // fails only when started twice
	}
	if err := exec.Start(ctx); err != nil {
		if svc.relay != nil {
			_ = svc.relay.Stop(context.Background())
		}
		if cfg.Delay.Enabled {
			_ = svc.delay.Stop(context.Background())
		}
		if apiSrv != nil {
			_ = apiSrv.Shutdown(context.Background())
		}
		return err
	}
	logger.Info("executor serving", "addr", exec.Addr().String(), "appname", cfg.XXL.Job.Executor.AppName)

	<-ctx.Done()
	logger.Info("shutting down")
	// A fresh deadline: the root context is already cancelled. Running jobs
	// get ShutdownTimeout, callbacks and servers a little more.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.XXL.Job.Executor.ShutdownTimeout+15*time.Second)
	defer cancel()
	var errs []error
	errs = append(errs, exec.Shutdown(sctx))
	if cfg.Delay.Enabled {
		errs = append(errs, svc.delay.Stop(sctx)) // before Redis and the database close
	}
	if svc.relay != nil {
		// After the jobs that write outbox events, before the database closes.
		errs = append(errs, svc.relay.Stop(sctx))
	}
	if apiSrv != nil {
		errs = append(errs, apiSrv.Shutdown(sctx))
	}
	if err := errors.Join(errs...); err != nil {
		logger.Error("shutdown", "err", err)
		return err
	}
	logger.Info("stopped")
	return nil
}
