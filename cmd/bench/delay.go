package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/sql/migrations"
)

func init() {
	addBench("delay", benchmark{
		summary: "delayed-task lateness at a sustained rate, with N dispatchers; lost and doubled tasks",
		run:     runDelayBench,
	})
}

// dbenchEnv is a bench's own database and Redis key prefix, created for the
// run and removed after it.
type dbenchEnv struct {
	serverDSN string
	dsn       string // opens the bench database
	dbName    string
	redisAddr string
	prefix    string
	db        *sqlx.DB
	rdb       *redis.Client
	stderr    io.Writer
}

// dbenchSetup creates database bench_{kind}_{random} and migrates it, and
// picks the Redis prefix bench:{kind}:{random}:.
func dbenchSetup(ctx context.Context, kind, serverDSN, redisAddr string, stderr io.Writer) (*dbenchEnv, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	e := &dbenchEnv{serverDSN: serverDSN, dbName: "bench_" + kind + "_" + tag, redisAddr: redisAddr,
		prefix: "bench:" + kind + ":" + tag + ":", stderr: stderr}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	cfg.ParseTime, cfg.Loc, cfg.InterpolateParams = true, time.UTC, true
	// The orders package judges due by NOW() in the session zone; UTC keeps
	// it equal to the delayed tasks' UTC_TIMESTAMP whatever the server's.
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	cfg.DBName = ""
	admin, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+e.dbName+"` CHARACTER SET utf8mb4"); err != nil {
		return nil, fmt.Errorf("create database %s: %w", e.dbName, err)
	}
	cfg.DBName = e.dbName
	e.dsn = cfg.FormatDSN()
	if e.db, err = e.open(64); err != nil {
		e.close()
		return nil, err
	}
	if _, err := migrations.Apply(ctx, e.db.DB); err != nil {
		e.close()
		return nil, fmt.Errorf("migrate %s: %w", e.dbName, err)
	}
	e.rdb = redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 64})
	if err := e.rdb.Ping(ctx).Err(); err != nil {
		e.close()
		return nil, fmt.Errorf("redis at %s: %w", redisAddr, err)
	}
	fmt.Fprintf(stderr, "bench: database %s, Redis prefix %s (both removed at the end)\n", e.dbName, e.prefix)
	return e, nil
}

// open opens another pool on the bench database (one per simulated process).
func (e *dbenchEnv) open(conns int) (*sqlx.DB, error) {
	db, err := sqlx.Open("mysql", e.dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// newRedis opens another Redis client (one per simulated process).
func (e *dbenchEnv) newRedis() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: e.redisAddr, PoolSize: 64})
}

// flushPrefix deletes every key under the prefix (the bench's FLUSHALL).
func (e *dbenchEnv) flushPrefix(ctx context.Context) (int, error) {
	n := 0
	iter := e.rdb.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := e.rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return n, err
		}
		n++
	}
	return n, iter.Err()
}

// close drops the database and the keys, whatever state the run is in.
func (e *dbenchEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if e.rdb != nil {
		if _, err := e.flushPrefix(ctx); err != nil {
			fmt.Fprintf(e.stderr, "bench: delete Redis keys %s*: %v\n", e.prefix, err)
		}
		e.rdb.Close()
	}
	if e.db != nil {
		e.db.Close()
	}
	cfg, err := mysql.ParseDSN(e.serverDSN)
	if err != nil {
		return
	}
	cfg.DBName = ""
	admin, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+e.dbName+"`"); err != nil {
		fmt.Fprintf(e.stderr, "bench: drop database %s: %v\n", e.dbName, err)
	}
}

func dbenchDefaultMySQL() string {
	if v := os.Getenv("BENCH_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

func dbenchDefaultRedis() string {
	if v := os.Getenv("BENCH_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// percentile of sorted values (nearest rank).
func dbenchPercentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// delayBenchTracker records, per task index, the first start and the
// number of successful completions.
type delayBenchTracker struct {
	firstStart []atomic.Int64 // UnixNano, 0 = never started
	executeAt  []atomic.Int64 // UnixNano of the task's execute time
	completed  []atomic.Int32
	starts     atomic.Int64
	firstDone  atomic.Int64 // tasks completed at least once
	batches    func(n int)  // with -profile: told each batch call's size
}

func taskIndex(biz string) (int, bool) {
	i := strings.LastIndexByte(biz, '-')
	n, err := strconv.Atoi(biz[i+1:])
	return n, err == nil
}

// complete counts a completion of task i.
func (tr *delayBenchTracker) complete(i int) {
	if tr.completed[i].Add(1) == 1 {
		tr.firstDone.Add(1)
	}
}

// wrap measures around a handler: lateness at the first start, and
// completions (a handler returning nil).
func (tr *delayBenchTracker) wrap(inner delay.HandlerFunc) delay.HandlerFunc {
	return func(ctx context.Context, t *delay.Task) error {
		now := time.Now().UnixNano()
		i, ok := taskIndex(t.BizUUID)
		if !ok || i >= len(tr.firstStart) {
			return delay.Permanent(fmt.Errorf("bench: unknown task %s", t.BizUUID))
		}
		tr.starts.Add(1)
		if tr.firstStart[i].CompareAndSwap(0, now) {
			tr.executeAt[i].Store(t.ExecuteTime.UnixNano())
		}
		err := inner(ctx, t)
		if err == nil {
			tr.complete(i)
		}
		return err
	}
}

// wrapBatch measures around a batch handler as wrap does around a handler,
// per task of the call.
func (tr *delayBenchTracker) wrapBatch(inner delay.BatchHandlerFunc) delay.BatchHandlerFunc {
	return func(ctx context.Context, tasks []*delay.Task) []error {
		now := time.Now().UnixNano()
		idx := make([]int, len(tasks))
		for k, t := range tasks {
			i, ok := taskIndex(t.BizUUID)
			if !ok || i >= len(tr.firstStart) {
				i = -1
			} else if tr.firstStart[i].CompareAndSwap(0, now) {
				tr.executeAt[i].Store(t.ExecuteTime.UnixNano())
			}
			idx[k] = i
			tr.starts.Add(1)
		}
		if tr.batches != nil {
			tr.batches(len(tasks))
		}
		errs := inner(ctx, tasks)
		for k, i := range idx {
			switch {
			case i < 0:
				errs[k] = delay.Permanent(fmt.Errorf("bench: unknown task %s", tasks[k].BizUUID))
			case errs[k] == nil:
				tr.complete(i)
			}
		}
		return errs
	}
}

// delayFlags are bench delay's flags, checked.
type delayFlags struct {
	rates                            []int // -rate alone, or the -rates sweep
	sweep                            bool
	duration                         time.Duration
	executors, workers, handlerBatch int
	handler                          string
	lead                             time.Duration
	during, single, steady           bool
	poll, reconcile, flushAt         time.Duration
	mysqlDSN, redisAddr              string
	timerKind, rabbitURL             string
	republishAfter, closeAt, purgeAt time.Duration
	prefetch                         int
	profile                          bool   // -profile
	cpuProfile                       string // -cpuprofile
	timeline                         time.Duration
	oldTaskIndexes                   bool // -old-task-indexes: a what-if
	registerRate                     int
	batchSize                        int
}

// mode is how the handler gets its tasks: batch (the executor's batch
// handler) or single (one call per task).
func (o *delayFlags) mode() string {
	if o.single || o.handler != delay.OrderTimeoutCloseHandler {
		return "single"
	}
	return "batch"
}

func parseDelayFlags(args []string, stderr io.Writer) (*delayFlags, error) {
	o := &delayFlags{}
	fs := flag.NewFlagSet("bench delay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.Int("rate", 1000, "tasks due per second")
	rates := fs.String("rates", "", "a sweep: comma-separated rates (tasks due per second), each run in turn for -duration in a database of its own, then a table of them all (instead of -rate)")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long tasks keep coming due (at each rate)")
	fs.IntVar(&o.executors, "executors", 2, "dispatchers, each with its own database pool and Redis client")
	fs.StringVar(&o.handler, "handler", delay.OrderTimeoutCloseHandler, "orderTimeoutClose (real close of demo orders) or noop")
	fs.DurationVar(&o.lead, "lead", 5*time.Second, "with -register-during: how long before its execute time each task is registered; otherwise the gap between the end of registration (estimated at -register-rate) and the first due task")
	fs.IntVar(&o.registerRate, "register-rate", 5000, "registrations per second the gap before the first due task is planned for (all registered before the run); lower it on a busy machine, where registration that runs past the first due time makes the figures a backlog's")
	fs.BoolVar(&o.steady, "steady", false, "steady state, as in production: register each task -lead ahead of its due time (default 30s here) at the rate tasks fall due, for the whole run, so registration and dispatch share the server (-register-during with a longer lead)")
	fs.BoolVar(&o.during, "register-during", false, "register each task lead ahead of its time while others run (default: all registered before the first is due, as the demo orders are placed before)")
	fs.IntVar(&o.workers, "workers", 8, "handler workers per dispatcher (the order close peaks at a few concurrent closes on 2 cores)")
	fs.BoolVar(&o.single, "single", false, "orderTimeoutClose: one CloseOrder per task (the per-order handler) instead of the executor's batch handler (CloseOrders)")
	fs.IntVar(&o.batchSize, "batch-size", 0, "dispatcher BatchSize: most tasks popped and claimed at once (0: the default)")
	fs.IntVar(&o.handlerBatch, "handler-batch", 0, "dispatcher HandlerBatchSize: most tasks per batch handler call (0: the default, BatchSize)")
	fs.DurationVar(&o.poll, "poll", 50*time.Millisecond, "dispatcher PollInterval")
	fs.DurationVar(&o.reconcile, "reconcile", 30*time.Second, "dispatcher ReconcileInterval")
	fs.DurationVar(&o.flushAt, "flush-at", 0, "delete the bench's Redis keys this long after the first task is due (0: never)")
	fs.StringVar(&o.mysqlDSN, "mysql", dbenchDefaultMySQL(), "MySQL server DSN (no database; env BENCH_MYSQL_DSN)")
	fs.StringVar(&o.redisAddr, "redis", dbenchDefaultRedis(), "Redis address (env BENCH_REDIS_ADDR)")
	fs.StringVar(&o.timerKind, "timer", "redis", "the dispatchers' timer: redis or rabbitmq (delay-tier queues; Redis still holds the order locks)")
	fs.StringVar(&o.rabbitURL, "rabbitmq", dbenchDefaultRabbitMQ(), "-timer rabbitmq: broker URL (env BENCH_RABBITMQ_URL)")
	fs.DurationVar(&o.republishAfter, "republish-after", 10*time.Second, "-timer rabbitmq: RabbitMQConfig.RepublishAfter")
	fs.IntVar(&o.prefetch, "prefetch", 10000, "-timer rabbitmq: RabbitMQConfig.Prefetch")
	fs.DurationVar(&o.closeAt, "close-connections-at", 0, "-timer rabbitmq: have the broker close every connection of the run this long after the first task is due (rabbitmqctl close_connection; 0: never)")
	fs.DurationVar(&o.purgeAt, "purge-at", 0, "-timer rabbitmq: purge every delay-tier queue this long after the first task is due (0: never)")
	fs.BoolVar(&o.profile, "profile", false, "after each run: batch sizes, server statements and commits, Redis calls per task, CPU of this process, mariadbd and redis-server")
	fs.DurationVar(&o.timeline, "timeline", 0, "after each run: lateness (p50, p99, max) per slice of this length of execute time, to see when a tail happens (0: none)")
	fs.BoolVar(&o.oldTaskIndexes, "old-task-indexes", false, "a what-if: add back to job_delay_task, after the migration, the status-led indexes migration 0091 dropped (idx_status_updated, idx_status_published), to measure what their upkeep costs")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write this process's CPU profile (pprof) from the first due time to the last task done to this file (with -rates: the last rate's)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.steady {
		o.during = true
		if !set["lead"] {
			o.lead = 30 * time.Second
		}
	}
	switch {
	case set["rates"] && set["rate"]:
		return nil, errors.New("-rate and -rates: give one (-rates runs each of its rates in turn)")
	case set["rates"]:
		rs, err := parseRates(*rates)
		if err != nil {
			return nil, fmt.Errorf("-rates: %w", err)
		}
		o.rates, o.sweep = rs, true
	default:
		o.rates = []int{*rate}
	}
	if *rate < 1 || o.duration <= 0 || o.executors < 1 || o.workers < 1 || o.registerRate < 1 {
		return nil, errors.New("-rate, -duration, -executors, -workers and -register-rate must be positive")
	}
	if o.handler != delay.OrderTimeoutCloseHandler && o.handler != "noop" {
		return nil, fmt.Errorf("-handler %q: want orderTimeoutClose or noop", o.handler)
	}
	if o.timerKind != "redis" && o.timerKind != "rabbitmq" {
		return nil, fmt.Errorf("-timer %q: want redis or rabbitmq", o.timerKind)
	}
	if o.timerKind != "rabbitmq" && (o.closeAt > 0 || o.purgeAt > 0) {
		return nil, errors.New("-close-connections-at and -purge-at need -timer rabbitmq")
	}
	return o, nil
}

func runDelayBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDelayFlags(args, stderr)
	if err != nil {
		return err
	}
	if !o.sweep {
		_, err := runDelayRate(ctx, o, o.rates[0], stdout, stderr)
		return err
	}
	return runDelaySweep(ctx, o, stdout, stderr)
}

// runDelayRate runs the bench at one rate in a database and Redis prefix
// of its own, prints its figures (ending with the p50_ms=… line) and
// returns them. A lost or doubled task is an error, after the figures.
func runDelayRate(ctx context.Context, o *delayFlags, rate int, stdout, stderr io.Writer) (out delayRun, err error) {
	n := int(math.Round(float64(rate) * o.duration.Seconds()))
	loadStart := loadAverage()

	env, err := dbenchSetup(ctx, "delay", o.mysqlDSN, o.redisAddr, stderr)
	if err != nil {
		return out, err
	}
	defer env.close()
	if err := addOldTaskIndexes(ctx, env.db, o.oldTaskIndexes, stdout); err != nil {
		return out, err
	}

	// Demo orders, all past their deadline, one per task.
	var orderNos []string
	if o.handler == delay.OrderTimeoutCloseHandler {
		t0 := time.Now()
		res, err := orderdemo.Generate(ctx, env.db, orderdemo.Spec{Orders: n, DueFraction: 1, OrderNoPrefix: "BD", Parallel: 4})
		if err != nil {
			return out, err
		}
		orderNos = make([]string, n)
		for i := range n {
			orderNos[i] = "BD" + strconv.FormatInt(res.FirstID+int64(i), 10)
		}
		fmt.Fprintf(stderr, "bench: %d demo orders generated in %s\n", res.Orders, time.Since(t0).Round(time.Millisecond))
	}

	tr := &delayBenchTracker{firstStart: make([]atomic.Int64, n), executeAt: make([]atomic.Int64, n), completed: make([]atomic.Int32, n)}
	var prof *delayProfile
	if o.profile {
		prof = newDelayProfile(env.db, env.rdb, env.dbName)
		tr.batches = prof.batch
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var dispatchers []*delay.Dispatcher
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	var rb *rabbitBench
	var regTimer delay.Timer
	if o.timerKind == "rabbitmq" {
		rb = newRabbitBench(o.rabbitURL, o.republishAfter, o.prefetch, stderr)
		// Stopped after the dispatchers (deferred before them).
		defer rb.close()
		rt, err := rb.timer(ctx, env.db, log, false)
		if err != nil {
			return out, err
		}
		regTimer = rt
	}
	for e := range o.executors {
		db, err := env.open(o.workers + 8)
		if err != nil {
			return out, err
		}
		rdb := env.newRedis()
		closers = append(closers, func() { db.Close(); rdb.Close() })
		// The executor's wiring (internal/app): orderTimeoutClose is a batch
		// handler over Closer.CloseOrders; -single runs the per-order handler
		// instead, for comparison.
		singleHandlers := map[string]delay.HandlerFunc{}
		batchHandlers := map[string]delay.BatchHandlerFunc{}
		if o.handler == delay.OrderTimeoutCloseHandler {
			closer, err := newCloser(db, rdb, env.prefix, 0, log)
			if err != nil {
				return out, err
			}
			if o.single {
				singleHandlers[o.handler] = tr.wrap(handlers.DelayOrderClose(closer.CloseOrder))
			} else {
				batchHandlers[o.handler] = tr.wrapBatch(app.OrderCloseBatchHandler(closer))
			}
		} else {
			singleHandlers[o.handler] = tr.wrap(func(context.Context, *delay.Task) error { return nil })
		}
		var timer delay.Timer
		if rb != nil {
			rt, err := rb.timer(ctx, db, log, true)
			if err != nil {
				return out, err
			}
			timer = rt
		}
		d, err := delay.NewDispatcher(db, rdb, delay.Config{
			Timer: timer, KeyPrefix: env.prefix, Logger: log.With("executor", e),
			Handlers: singleHandlers, BatchHandlers: batchHandlers, BatchSize: o.batchSize, HandlerBatchSize: o.handlerBatch,
			Workers:      o.workers,
			PollInterval: o.poll, ReconcileInterval: o.reconcile,
		})
		if err != nil {
			return out, err
		}
		dispatchers = append(dispatchers, d)
	}
	for _, d := range dispatchers {
		if err := d.Start(ctx); err != nil {
			return out, err
		}
	}
	stopAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, d := range dispatchers {
			if err := d.Stop(sctx); err != nil {
				fmt.Fprintf(stderr, "bench: stop dispatcher: %v\n", err)
			}
		}
	}
	defer stopAll()

	// The order service: its own pool and Redis client, registering each
	// task lead ahead of its execute time.
	regDB, err := env.open(16)
	if err != nil {
		return out, err
	}
	defer regDB.Close()
	regRedis := env.newRedis()
	defer regRedis.Close()
	client, err := delay.NewClient(regDB, regRedis, delay.ClientConfig{Timer: regTimer, KeyPrefix: env.prefix, Logger: log})
	if err != nil {
		return out, err
	}
	start := time.Now().Add(time.Second) // first registration
	firstDue := start.Add(o.lead)
	interval := time.Duration(float64(time.Second) / float64(rate))
	regInterval := interval
	if !o.during {
		regInterval = 0
		firstDue = firstDue.Add(time.Duration(n) * time.Second / time.Duration(o.registerRate))
	}
	fmt.Fprintf(stderr, "bench: %d tasks due at %d/s for %s from +%s, %d dispatcher(s) x %d workers, handler %s, registered during the run: %t\n",
		n, rate, o.duration, time.Until(firstDue).Round(time.Second), o.executors, o.workers, o.handler, o.during)
	var regErrs atomic.Int64
	var regWG sync.WaitGroup
	var maxRegBehind atomic.Int64
	const producers = 16
	for p := range producers {
		regWG.Go(func() {
			for i := p; i < n && ctx.Err() == nil; i += producers {
				regAt := start.Add(time.Duration(i) * regInterval)
				if d := time.Until(regAt); d > 0 {
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return
					}
				}
				if behind := -time.Until(regAt); behind > time.Duration(maxRegBehind.Load()) {
					maxRegBehind.Store(int64(behind))
				}
				r := delay.Registration{BizUUID: "bd-" + strconv.Itoa(i), Handler: o.handler,
					ExecuteTime: firstDue.Add(time.Duration(i) * interval)}
				if orderNos != nil {
					r.Payload = delay.OrderTimeoutPayload{OrderNo: orderNos[i]}
				}
				if _, _, err := client.Register(ctx, r); err != nil {
					if regErrs.Add(1) <= 5 {
						fmt.Fprintf(stderr, "bench: register %s: %v\n", r.BizUUID, err)
					}
				}
			}
		})
	}
	var faults []*benchFault
	if o.flushAt > 0 {
		faults = append(faults, &benchFault{name: "the Redis flush", at: o.flushAt, run: func(ctx context.Context) (string, error) {
			k, err := env.flushPrefix(ctx)
			return fmt.Sprintf("deleted %d Redis keys under %s", k, env.prefix), err
		}})
	}
	if o.closeAt > 0 {
		faults = append(faults, &benchFault{name: "the broker closed the connections", at: o.closeAt, run: rb.closeConnections})
	}
	if o.purgeAt > 0 {
		faults = append(faults, &benchFault{name: "the tier queues were purged", at: o.purgeAt, run: rb.purgeTiers})
	}
	var flushWG sync.WaitGroup
	for _, f := range faults {
		flushWG.Go(func() { f.inject(ctx, firstDue, stderr) })
	}
	var profWG sync.WaitGroup
	var cpuFile *os.File
	profWG.Go(func() {
		select {
		case <-time.After(time.Until(firstDue)):
		case <-ctx.Done():
			return
		}
		if prof != nil {
			prof.begin(ctx)
		}
		if o.cpuProfile != "" {
			f, err := os.Create(o.cpuProfile)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				fmt.Fprintf(stderr, "bench: -cpuprofile: %v\n", err)
				return
			}
			cpuFile = f
		}
	})
	regWG.Wait()
	regTook, regAhead := time.Since(start), time.Until(firstDue)
	flushWG.Wait()
	lastDue := firstDue.Add(time.Duration(n-1) * interval)

	// Wait until every task has completed, watching the tracker (a COUNT
	// over the task table every few hundred ms would be server work of the
	// bench's own, growing with the table, at the rates measured), then
	// until the table shows every task DONE (or give up).
	// From the last due time, or the end of registration when that ran
	// later (the tasks then come due as a backlog).
	deadline := lastDue
	if now := time.Now(); now.After(deadline) {
		deadline = now
	}
	deadline = deadline.Add(2*o.reconcile + 60*time.Second)
	var done int
	finished := time.Time{}
	for ctx.Err() == nil && !time.Now().After(deadline) {
		if finished.IsZero() && tr.firstDone.Load() >= int64(n) {
			finished = time.Now()
		}
		if !finished.IsZero() {
			if err := env.db.GetContext(ctx, &done, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'DONE'`); err != nil {
				return out, err
			}
			if done >= n {
				break
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if finished.IsZero() {
		finished = time.Now()
	}
	if done < n {
		// Gave up (or stopped) before the table showed every task DONE:
		// how far it got.
		if err := env.db.GetContext(context.WithoutCancel(ctx), &done, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'DONE'`); err != nil {
			return out, err
		}
	}
	profWG.Wait()
	if cpuFile != nil {
		pprof.StopCPUProfile()
		if err := cpuFile.Close(); err != nil {
			fmt.Fprintf(stderr, "bench: -cpuprofile: %v\n", err)
		}
	}
	stopAll()
	dispatchersStopped := dispatchers
	dispatchers = nil

	// Check against the table: every task DONE and completed once.
	var rows []struct {
		BizUUID string `db:"biz_uuid"`
		Status  string `db:"status"`
	}
	if err := env.db.SelectContext(context.WithoutCancel(ctx), &rows, `SELECT biz_uuid, status FROM job_delay_task`); err != nil {
		return out, err
	}
	status := make([]string, n)
	for _, r := range rows {
		if i, ok := taskIndex(r.BizUUID); ok && i < n {
			status[i] = r.Status
		}
	}
	lost, dup := 0, 0
	var late []float64
	for i := range n {
		c := tr.completed[i].Load()
		if status[i] != "DONE" || c == 0 {
			lost++
		}
		if c > 1 {
			dup++
		}
		if s := tr.firstStart[i].Load(); s != 0 {
			l := float64(s-tr.executeAt[i].Load()) / 1e6
			late = append(late, l)
			// Due after a fault: those registered before it lost their
			// timer entries; the reconciler brings them back.
			for _, f := range faults {
				if at := tr.executeAt[i].Load(); f.doneNS != 0 && at >= f.doneNS {
					f.after = append(f.after, l)
				}
			}
		}
	}
	var closedOrders, closeLogs int
	if orderNos != nil {
		bg := context.WithoutCancel(ctx)
		if err := env.db.GetContext(bg, &closedOrders, `SELECT COUNT(*) FROM order_info WHERE status = 2`); err != nil {
			return out, err
		}
		if err := env.db.GetContext(bg, &closeLogs, `SELECT COUNT(*) FROM order_close_log`); err != nil {
			return out, err
		}
	}
	slices.Sort(late)
	window := finished.Sub(firstDue).Seconds()
	fmt.Fprintf(stdout, "delay bench: %d tasks due at %d/s over %s, %d dispatcher(s) x %d workers, handler %s (%s)\n",
		n, rate, o.duration, o.executors, o.workers, o.handler, o.mode())
	out.regOverran = printRegistration(stdout, o, registration{n: n, took: regTook, ahead: regAhead, errs: regErrs.Load(),
		behind: time.Duration(maxRegBehind.Load())})
	if len(late) > 0 {
		fmt.Fprintf(stdout, "lateness (execute time -> handler start), ms: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  min %.1f\n",
			dbenchPercentile(late, 50), dbenchPercentile(late, 90), dbenchPercentile(late, 99), dbenchPercentile(late, 99.9),
			late[len(late)-1], late[0])
	}
	fmt.Fprintf(stdout, "throughput: %d tasks done in %.1fs from the first due time (%.0f/s); %d handler starts\n",
		done, window, float64(done)/window, tr.starts.Load())
	for i, d := range dispatchersStopped {
		c := d.Counters()
		fmt.Fprintf(stdout, "dispatcher %d: claimed %d done %d retried %d failed %d lost-claims %d recovered %d outcomes %v\n",
			i, c.Claimed, c.Done, c.Retried, c.Failed, c.Lost, c.Recovered, c.Outcomes)
	}
	if orderNos != nil {
		fmt.Fprintf(stdout, "orders: %d closed, %d close-log rows (of %d)\n", closedOrders, closeLogs, n)
	}
	for _, f := range faults {
		slices.Sort(f.after)
		if len(f.after) > 0 {
			over := len(f.after) - sortIndexAbove(f.after, 1000)
			bound := ""
			if rb != nil {
				bound = fmt.Sprintf(", republish after %s", o.republishAfter)
			}
			fmt.Fprintf(stdout, "after %s: %d tasks due after it all ran, %d of them over 1s late, lateness max %.0f ms (reconcile interval %s%s)\n",
				f.name, len(f.after), over, f.after[len(f.after)-1], o.reconcile, bound)
		}
	}
	dupPublish := ""
	if rb != nil {
		s := rb.stats()
		fmt.Fprintf(stdout, "rabbitmq: %d messages published, %d hops, %d published again by the reconciler, %d duplicates dropped at the claim (%.3f%% of tasks), %d publishes not confirmed, %d reconnects\n",
			s.Published, s.Hops, s.Republished, s.Duplicates, 100*float64(s.Duplicates)/float64(n), s.Failures, s.Reconnects)
		dupPublish = fmt.Sprintf(" dup_publish_pct=%.3f", 100*float64(s.Duplicates)/float64(n))
	}
	out = delayRun{regOverran: out.regOverran, rate: rate, achieved: float64(done) / window, lost: lost, dup: dup,
		p50: dbenchPercentile(late, 50), p99: dbenchPercentile(late, 99), p999: dbenchPercentile(late, 99.9),
		loadStart: loadStart, loadEnd: loadAverage()}
	if prof != nil {
		prof.print(context.WithoutCancel(ctx), stdout, n)
	}
	if o.timeline > 0 {
		printTimeline(stdout, tr, firstDue, o.timeline)
	}
	fmt.Fprintf(stdout, "load average (1, 5, 15 min) at the start: %s; at the end: %s\n", out.loadStart, out.loadEnd)
	fmt.Fprintf(stdout, "lost=%d (not DONE or never completed)  dup=%d (completed more than once)\n", lost, dup)
	fmt.Fprintf(stdout, "p50_ms=%.0f p99_ms=%.0f p999_ms=%.0f lost=%d dup=%d%s\n", out.p50, out.p99, out.p999, lost, dup, dupPublish)
	if lost > 0 || dup > 0 || (orderNos != nil && (closedOrders != n || closeLogs != n)) {
		return out, fmt.Errorf("%d lost, %d doubled", lost, dup)
	}
	return out, ctx.Err()
}

// sortIndexAbove is the index of the first value above x in sorted.
func sortIndexAbove(sorted []float64, x float64) int {
	i, _ := slices.BinarySearch(sorted, math.Nextafter(x, math.Inf(1)))
	return i
}

// benchFault is something done to the run at a set time after the first
// task is due (a Redis flush, the broker closing connections, a purge); the
// tasks due after it show how the reconciler made up for it.
type benchFault struct {
	name   string
	at     time.Duration
	run    func(context.Context) (string, error)
	doneNS int64     // when it was done (UnixNano), 0 never
	after  []float64 // lateness of the tasks due after it, ms
}

// inject waits until firstDue + at, then runs the fault.
func (f *benchFault) inject(ctx context.Context, firstDue time.Time, stderr io.Writer) {
	select {
	case <-time.After(time.Until(firstDue.Add(f.at))):
	case <-ctx.Done():
		return
	}
	what, err := f.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s: %v\n", f.name, err)
	}
	f.doneNS = time.Now().UnixNano()
	fmt.Fprintf(stderr, "bench: %s at +%s\n", what, time.Since(firstDue).Round(time.Millisecond))
}
