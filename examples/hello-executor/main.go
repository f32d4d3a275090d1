// Command hello-executor is the smallest complete XXL-JOB executor built on
// package xxljob: one handler, the Java executor's environment variables,
// Prometheus metrics, and a graceful stop on SIGTERM. It imports nothing of
// the order executor; copy it to start a service of your own.
//
//	XXL_JOB_ADMIN_ADDRESSES=http://127.0.0.1:8080 \
//	XXL_JOB_ACCESS_TOKEN=default_token \
//	XXL_JOB_EXECUTOR_APPNAME=hello-executor \
//	go run ./examples/hello-executor
//
// (an admin older than 3.4.1 serves under http://127.0.0.1:8080/xxl-job-admin).
//
// Then create the executor group "hello-executor" and a BEAN job with the
// JobHandler helloJob in the admin console, and run it once. Metrics are on
// METRICS_ADDR (default 127.0.0.1:9101) at /metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobprom"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	if err := run(ctx, logger, os.LookupEnv); err != nil {
		logger.Error("hello-executor", "error", err)
		os.Exit(1)
	}
}

// hello is the job: it greets whoever the job param names.
func hello(ctx context.Context, req *xxljob.Request) error {
	who := req.Param
	if who == "" {
		who = "world"
	}
	req.Logf("hello, %s (shard %d of %d)", who, req.ShardIndex, req.ShardTotal)
	select { // a real job does its work here, watching ctx
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	req.SetResult("greeted " + who)
	return nil
}

// run serves until ctx ends, then shuts down in order.
func run(ctx context.Context, logger *slog.Logger, lookup func(string) (string, bool)) error {
	cfg, err := xxljob.ConfigFromLookup(lookup)
	if err != nil {
		return err
	}
	if cfg.AppName == "" {
		cfg.AppName = "hello-executor"
	}
	obs := xxljobprom.New(xxljobprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	cfg.Logger, cfg.Observer = logger, obs

	exec, err := xxljob.New(cfg)
	if err != nil {
		return err
	}
	obs.Watch(exec)
	if err := exec.Register("helloJob", xxljob.HandlerFunc(hello)); err != nil {
		return err
	}
	if err := exec.Start(ctx); err != nil {
		return err
	}

	metricsAddr, ok := lookup("METRICS_ADDR")
	if !ok {
		metricsAddr = "127.0.0.1:9101"
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	metrics := &http.Server{Addr: metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- metrics.ListenAndServe() }()
	logger.Info("hello-executor serving", "xxl_job", exec.Addr().String(), "metrics", metricsAddr)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// A fresh deadline: ctx is over. The executor drains first (beats fail,
	// queued runs are killed, running ones get ShutdownTimeout), then the
	// metrics server goes.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	defer cancel()
	errs := []error{exec.Shutdown(sctx), metrics.Shutdown(sctx)}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("metrics server: %w", serveErr))
	} else if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("metrics server: %w", err))
	}
	return errors.Join(errs...)
}
