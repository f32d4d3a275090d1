package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
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
	cfg, err := dbtest.AdminConfig(serverDSN)
	if err != nil {
		return nil, fmt.Errorf("-mysql: %w", err)
	}
	// The orders package judges due by NOW() in the session zone; UTC keeps
	// it equal to the delayed tasks' UTC_TIMESTAMP whatever the server's.
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
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
	return cmp.Or(os.Getenv("BENCH_MYSQL_DSN"), "root@tcp(127.0.0.1:3306)/")
}

func dbenchDefaultRedis() string {
	return cmp.Or(os.Getenv("BENCH_REDIS_ADDR"), "127.0.0.1:6379")
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
