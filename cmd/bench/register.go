package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/api"
)

func init() {
	addBench("register", benchmark{
		summary: "idempotent delayed-task registrations per second, through the Go API and over HTTP",
		run:     runRegisterBench,
	})
}

// registerResult is one phase's count.
type registerResult struct {
	ops, created, existing, errs int64
	elapsed                      time.Duration
	lat                          []float64 // ms, sorted
}

func (r registerResult) perSecond() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func (r registerResult) String() string {
	return fmt.Sprintf("%d registrations in %.1fs = %.0f/s (%d new, %d repeats answered with the existing task, %d errors); latency ms p50 %.2f p99 %.2f",
		r.ops, r.elapsed.Seconds(), r.perSecond(), r.created, r.existing, r.errs,
		dbenchPercentile(r.lat, 50), dbenchPercentile(r.lat, 99))
}

// registerLoad runs op from conc goroutines for d. op(worker, i) returns
// created, or an error. A fraction dup of calls repeat an earlier bizUuid of
// the same worker.
func registerLoad(ctx context.Context, conc int, d time.Duration, op func(ctx context.Context, w, i int) (bool, error), stderr io.Writer) registerResult {
	var res registerResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := range conc {
		wg.Go(func() {
			var lat []float64
			var ops, created, existing, errs int64
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				cr, err := op(ctx, w, i)
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
				ops++
				switch {
				case err != nil:
					if errs++; errs <= 3 {
						fmt.Fprintf(stderr, "bench: register: %v\n", err)
					}
				case cr:
					created++
				default:
					existing++
				}
			}
			mu.Lock()
			res.ops += ops
			res.created += created
			res.existing += existing
			res.errs += errs
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.lat)
	return res
}

// bizFor names call i of worker w; a fraction dup of calls reuse an earlier
// name of the worker (a client retrying), which must create nothing.
func bizFor(kind string, w, i int, dup float64, rng *rand.Rand) string {
	if i > 0 && rng.Float64() < dup {
		i = rng.IntN(i)
	}
	return kind + "-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
}

func runRegisterBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench register", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 10*time.Second, "length of each phase (Go API, then HTTP)")
	conc := fs.Int("concurrency", 16, "concurrent registering goroutines (Go) or connections (HTTP)")
	dup := fs.Float64("dup", 0.1, "fraction of registrations that repeat an earlier bizUuid")
	mysqlDSN := fs.String("mysql", dbenchDefaultMySQL(), "MySQL server DSN (no database; env BENCH_MYSQL_DSN)")
	redisAddr := fs.String("redis", dbenchDefaultRedis(), "Redis address (env BENCH_REDIS_ADDR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *conc < 1 || *duration <= 0 || *dup < 0 || *dup >= 1 {
		return errors.New("-concurrency and -duration must be positive, -dup in [0, 1)")
	}
	env, err := dbenchSetup(ctx, "register", *mysqlDSN, *redisAddr, stderr)
	if err != nil {
		return err
	}
	defer env.close()

	// An executor's view: a dispatcher (not started) whose Client checks
	// handler names, as the API port's does.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	noop := func(context.Context, *delay.Task) error { return nil }
	d, err := delay.NewDispatcher(env.db, env.rdb, delay.Config{KeyPrefix: env.prefix, Logger: log,
		Handlers: map[string]delay.HandlerFunc{delay.OrderTimeoutCloseHandler: noop}})
	if err != nil {
		return err
	}
	client := d.Client()

	// Go API: Register (its own transaction, then the timer).
	rngs := make([]*rand.Rand, *conc)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 1))
	}
	goRes := registerLoad(ctx, *conc, *duration, func(ctx context.Context, w, i int) (bool, error) {
		biz := bizFor("go", w, i, *dup, rngs[w])
		_, created, err := client.Register(ctx, delay.Registration{BizUUID: biz, Handler: delay.OrderTimeoutCloseHandler,
			Delay: time.Hour, Payload: delay.OrderTimeoutPayload{OrderNo: biz}})
		return created, err
	}, stderr)
	fmt.Fprintf(stdout, "Go API (Client.Register, %d goroutines): %s\n", *conc, goRes)

	// HTTP: the API port (token check included) on loopback.
	srv := api.New(api.Config{Addr: "127.0.0.1:0", Token: "bench-token", Logger: log})
	srv.MountDelayTasks(client)
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
	}()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = *conc
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	url := "http://" + srv.Addr().String() + "/api/delay-tasks"
	httpRes := registerLoad(ctx, *conc, *duration, func(ctx context.Context, w, i int) (bool, error) {
		return registerOverHTTP(ctx, hc, url, bizFor("http", w, i, *dup, rngs[w]))
	}, stderr)
	fmt.Fprintf(stdout, "HTTP (POST /api/delay-tasks, %d connections): %s\n", *conc, httpRes)

	rows, distinct, err := countRegistered(context.WithoutCancel(ctx), env)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "table: %d rows, %d distinct bizUuids, %d created by the runs\n", rows, distinct, goRes.created+httpRes.created)
	fmt.Fprintf(stdout, "go_per_s=%.0f http_per_s=%.0f\n", math.Floor(goRes.perSecond()), math.Floor(httpRes.perSecond()))
	if goRes.errs+httpRes.errs > 0 || rows != distinct || int64(rows) != goRes.created+httpRes.created {
		return fmt.Errorf("%d errors; %d rows for %d created registrations", goRes.errs+httpRes.errs, rows, goRes.created+httpRes.created)
	}
	return ctx.Err()
}

// registerOverHTTP registers biz through the API port at url, as an order
// service would; created is false when the task existed.
func registerOverHTTP(ctx context.Context, hc *http.Client, url, biz string) (created bool, err error) {
	body := `{"bizUuid":"` + biz + `","handler":"orderTimeoutClose","delayMs":3600000,"payload":{"orderNo":"` + biz + `"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Executor-Token", "bench-token")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated:
		return true, nil
	case http.StatusOK:
		return false, nil
	}
	return false, fmt.Errorf("POST: status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
}

// countRegistered counts the table's rows and distinct bizUuids: the table
// agrees when there is one row per bizUuid created, none duplicated.
func countRegistered(ctx context.Context, env *dbenchEnv) (rows, distinct int, err error) {
	if err := env.db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM job_delay_task`); err != nil {
		return 0, 0, err
	}
	if err := env.db.GetContext(ctx, &distinct, `SELECT COUNT(DISTINCT biz_uuid) FROM job_delay_task`); err != nil {
		return 0, 0, err
	}
	return rows, distinct, nil
}
