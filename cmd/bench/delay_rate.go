package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/orderdemo"
)

// delayRate is one run of the delayed-task bench at one rate: what its
// steps (set up, register, wait, check, print) share.
type delayRate struct {
	o       *delayFlags
	rate, n int
	stderr  io.Writer

	env         *dbenchEnv
	tr          *delayBenchTracker
	prof        *delayProfile
	log         *slog.Logger
	rb          *rabbitBench
	regTimer    delay.Timer
	orderNos    []string // the demo orders, one per task; nil with -handler noop
	dispatchers []*delay.Dispatcher
	faults      []*benchFault

	firstDue time.Time
	interval time.Duration // between two tasks' execute times
}

// delayCheck is what the table and the tracker say after a run.
type delayCheck struct {
	lost, dup               int
	late                    []float64 // ms, sorted
	closedOrders, closeLogs int
}

// runDelayRate runs the bench at one rate in a database and Redis prefix
// of its own, prints its figures (ending with the p50_ms=… line) and
// returns them. A lost or doubled task is an error, after the figures.
func runDelayRate(ctx context.Context, o *delayFlags, rate int, stdout, stderr io.Writer) (out delayRun, err error) {
	r := &delayRate{o: o, rate: rate, n: int(math.Round(float64(rate) * o.duration.Seconds())), stderr: stderr}
	loadStart := loadAverage()

	r.env, err = dbenchSetup(ctx, "delay", o.mysqlDSN, o.redisAddr, stderr)
	if err != nil {
		return out, err
	}
	defer r.env.close()
	if err := addOldTaskIndexes(ctx, r.env.db, o.oldTaskIndexes, stdout); err != nil {
		return out, err
	}
	if err := r.demoOrders(ctx); err != nil {
		return out, err
	}
	r.tr = &delayBenchTracker{firstStart: make([]atomic.Int64, r.n), executeAt: make([]atomic.Int64, r.n), completed: make([]atomic.Int32, r.n)}
	if o.profile {
		r.prof = newDelayProfile(r.env.db, r.env.rdb, r.env.dbName)
		r.tr.batches = r.prof.batch
	}
	r.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	if o.timerKind == "rabbitmq" {
		r.rb = newRabbitBench(o.rabbitURL, o.republishAfter, o.prefetch, stderr)
		// Stopped after the dispatchers (deferred before them).
		defer r.rb.close()
		rt, err := r.rb.timer(ctx, r.env.db, r.log, false)
		if err != nil {
			return out, err
		}
		r.regTimer = rt
	}
	if err := r.startDispatchers(ctx, &closers); err != nil {
		return out, err
	}
	defer r.stopDispatchers()

	reg, cpuFile, err := r.register(ctx)
	if err != nil {
		return out, err
	}
	done, finished, err := r.waitDone(ctx)
	if err != nil {
		return out, err
	}
	cpuFile.wait()
	r.stopDispatchers()
	stopped := r.dispatchers
	r.dispatchers = nil

	c, err := r.check(ctx)
	if err != nil {
		return out, err
	}
	window := finished.Sub(r.firstDue).Seconds()
	out = delayRun{rate: rate, achieved: float64(done) / window, lost: c.lost, dup: c.dup,
		p50: dbenchPercentile(c.late, 50), p99: dbenchPercentile(c.late, 99), p999: dbenchPercentile(c.late, 99.9),
		loadStart: loadStart}
	out.regOverran = r.print(ctx, stdout, reg, c, done, window, stopped, &out)
	if c.lost > 0 || c.dup > 0 || (r.orderNos != nil && (c.closedOrders != r.n || c.closeLogs != r.n)) {
		return out, fmt.Errorf("%d lost, %d doubled", c.lost, c.dup)
	}
	return out, ctx.Err()
}

// demoOrders generates the demo orders the tasks close, all past their
// deadline, one per task (none with -handler noop).
func (r *delayRate) demoOrders(ctx context.Context) error {
	if r.o.handler != delay.OrderTimeoutCloseHandler {
		return nil
	}
	t0 := time.Now()
	res, err := orderdemo.Generate(ctx, r.env.db, orderdemo.Spec{Orders: r.n, DueFraction: 1, OrderNoPrefix: "BD", Parallel: 4})
	if err != nil {
		return err
	}
	r.orderNos = make([]string, r.n)
	for i := range r.n {
		r.orderNos[i] = "BD" + strconv.FormatInt(res.FirstID+int64(i), 10)
	}
	fmt.Fprintf(r.stderr, "bench: %d demo orders generated in %s\n", res.Orders, time.Since(t0).Round(time.Millisecond))
	return nil
}

// startDispatchers makes and starts one dispatcher per executor, each on
// a pool and Redis client of its own (closed by the functions added to
// closers).
func (r *delayRate) startDispatchers(ctx context.Context, closers *[]func()) error {
	for e := range r.o.executors {
		db, err := r.env.open(r.o.workers + 8)
		if err != nil {
			return err
		}
		rdb := r.env.newRedis()
		*closers = append(*closers, func() { db.Close(); rdb.Close() })
		cfg := delay.Config{KeyPrefix: r.env.prefix, Logger: r.log.With("executor", e),
			Handlers: map[string]delay.HandlerFunc{}, BatchHandlers: map[string]delay.BatchHandlerFunc{},
			BatchSize: r.o.batchSize, HandlerBatchSize: r.o.handlerBatch, Workers: r.o.workers,
			PollInterval: r.o.poll, ReconcileInterval: r.o.reconcile}
		// The executor's wiring (internal/app): orderTimeoutClose is a batch
		// handler over Closer.CloseOrders; -single runs the per-order handler
		// instead, for comparison.
		if r.o.handler == delay.OrderTimeoutCloseHandler {
			closer, err := newCloser(db, rdb, r.env.prefix, 0, r.log)
			if err != nil {
				return err
			}
			if r.o.single {
				cfg.Handlers[r.o.handler] = r.tr.wrap(handlers.DelayOrderClose(closer.CloseOrder))
			} else {
				cfg.BatchHandlers[r.o.handler] = r.tr.wrapBatch(app.OrderCloseBatchHandler(closer))
			}
		} else {
			cfg.Handlers[r.o.handler] = r.tr.wrap(func(context.Context, *delay.Task) error { return nil })
		}
		if r.rb != nil {
			if cfg.Timer, err = r.rb.timer(ctx, db, r.log, true); err != nil {
				return err
			}
		}
		d, err := delay.NewDispatcher(db, rdb, cfg)
		if err != nil {
			return err
		}
		r.dispatchers = append(r.dispatchers, d)
	}
	for _, d := range r.dispatchers {
		if err := d.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stopDispatchers stops the dispatchers still running.
func (r *delayRate) stopDispatchers() {
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range r.dispatchers {
		if err := d.Stop(sctx); err != nil {
			fmt.Fprintf(r.stderr, "bench: stop dispatcher: %v\n", err)
		}
	}
}

// register is the order service: its own pool and Redis client,
// registering each task lead ahead of its execute time from 16 producers.
// Meanwhile it injects the faults asked for and, at the first due time,
// starts the profiles; it returns once every task is registered and every
// fault injected, with the CPU profile still running.
func (r *delayRate) register(ctx context.Context) (registration, *cpuProfile, error) {
	regDB, err := r.env.open(16)
	if err != nil {
		return registration{}, nil, err
	}
	defer regDB.Close()
	regRedis := r.env.newRedis()
	defer regRedis.Close()
	client, err := delay.NewClient(regDB, regRedis, delay.ClientConfig{Timer: r.regTimer, KeyPrefix: r.env.prefix, Logger: r.log})
	if err != nil {
		return registration{}, nil, err
	}
	start := time.Now().Add(time.Second) // first registration
	r.firstDue = start.Add(r.o.lead)
	r.interval = time.Duration(float64(time.Second) / float64(r.rate))
	regInterval := r.interval
	if !r.o.during {
		regInterval = 0
		r.firstDue = r.firstDue.Add(time.Duration(r.n) * time.Second / time.Duration(r.o.registerRate))
	}
	fmt.Fprintf(r.stderr, "bench: %d tasks due at %d/s for %s from +%s, %d dispatcher(s) x %d workers, handler %s, registered during the run: %t\n",
		r.n, r.rate, r.o.duration, time.Until(r.firstDue).Round(time.Second), r.o.executors, r.o.workers, r.o.handler, r.o.during)
	var regErrs, maxRegBehind atomic.Int64
	var regWG sync.WaitGroup
	const producers = 16
	for p := range producers {
		regWG.Go(func() { r.produce(ctx, client, p, producers, start, regInterval, &regErrs, &maxRegBehind) })
	}
	r.faults = r.benchFaults()
	var flushWG sync.WaitGroup
	for _, f := range r.faults {
		flushWG.Go(func() { f.inject(ctx, r.firstDue, r.stderr) })
	}
	cpu := r.startProfiles(ctx)
	regWG.Wait()
	reg := registration{n: r.n, took: time.Since(start), ahead: time.Until(r.firstDue), errs: regErrs.Load()}
	flushWG.Wait()
	reg.behind = time.Duration(maxRegBehind.Load())
	return reg, cpu, nil
}

// produce registers every step-th task from the first-th, each at its
// time from start (all at once when regInterval is 0), counting errors and
// how far behind its schedule it fell.
func (r *delayRate) produce(ctx context.Context, client *delay.Client, first, step int, start time.Time, regInterval time.Duration, regErrs, maxRegBehind *atomic.Int64) {
	for i := first; i < r.n && ctx.Err() == nil; i += step {
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
		reg := delay.Registration{BizUUID: "bd-" + strconv.Itoa(i), Handler: r.o.handler,
			ExecuteTime: r.firstDue.Add(time.Duration(i) * r.interval)}
		if r.orderNos != nil {
			reg.Payload = delay.OrderTimeoutPayload{OrderNo: r.orderNos[i]}
		}
		if _, _, err := client.Register(ctx, reg); err != nil {
			if regErrs.Add(1) <= 5 {
				fmt.Fprintf(r.stderr, "bench: register %s: %v\n", reg.BizUUID, err)
			}
		}
	}
}

// benchFaults are the faults the flags ask for.
func (r *delayRate) benchFaults() []*benchFault {
	var faults []*benchFault
	if r.o.flushAt > 0 {
		faults = append(faults, &benchFault{name: "the Redis flush", at: r.o.flushAt, run: func(ctx context.Context) (string, error) {
			k, err := r.env.flushPrefix(ctx)
			return fmt.Sprintf("deleted %d Redis keys under %s", k, r.env.prefix), err
		}})
	}
	if r.o.closeAt > 0 {
		faults = append(faults, &benchFault{name: "the broker closed the connections", at: r.o.closeAt, run: r.rb.closeConnections})
	}
	if r.o.purgeAt > 0 {
		faults = append(faults, &benchFault{name: "the tier queues were purged", at: r.o.purgeAt, run: r.rb.purgeTiers})
	}
	return faults
}

// cpuProfile is the -cpuprofile started at the first due time.
type cpuProfile struct {
	wg     sync.WaitGroup
	file   *os.File
	stderr io.Writer
}

// startProfiles starts -profile and -cpuprofile at the first due time.
func (r *delayRate) startProfiles(ctx context.Context) *cpuProfile {
	cpu := &cpuProfile{stderr: r.stderr}
	cpu.wg.Go(func() {
		select {
		case <-time.After(time.Until(r.firstDue)):
		case <-ctx.Done():
			return
		}
		if r.prof != nil {
			r.prof.begin(ctx)
		}
		if r.o.cpuProfile != "" {
			f, err := os.Create(r.o.cpuProfile)
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				fmt.Fprintf(r.stderr, "bench: -cpuprofile: %v\n", err)
				return
			}
			cpu.file = f
		}
	})
	return cpu
}

// wait waits for the profiles' start and stops the CPU profile.
func (c *cpuProfile) wait() {
	c.wg.Wait()
	if c.file != nil {
		pprof.StopCPUProfile()
		if err := c.file.Close(); err != nil {
			fmt.Fprintf(c.stderr, "bench: -cpuprofile: %v\n", err)
		}
	}
}

// waitDone waits until every task has completed, watching the tracker (a
// COUNT over the task table every few hundred ms would be server work of
// the bench's own, growing with the table, at the rates measured), then
// until the table shows every task DONE (or gives up). It returns how many
// are DONE and when the last completed.
func (r *delayRate) waitDone(ctx context.Context) (done int, finished time.Time, err error) {
	// From the last due time, or the end of registration when that ran
	// later (the tasks then come due as a backlog).
	deadline := r.firstDue.Add(time.Duration(r.n-1) * r.interval)
	if now := time.Now(); now.After(deadline) {
		deadline = now
	}
	deadline = deadline.Add(2*r.o.reconcile + 60*time.Second)
	for ctx.Err() == nil && !time.Now().After(deadline) {
		if finished.IsZero() && r.tr.firstDone.Load() >= int64(r.n) {
			finished = time.Now()
		}
		if !finished.IsZero() {
			if err := r.env.db.GetContext(ctx, &done, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'DONE'`); err != nil {
				return done, finished, err
			}
			if done >= r.n {
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
	if done < r.n {
		// Gave up (or stopped) before the table showed every task DONE:
		// how far it got.
		if err := r.env.db.GetContext(context.WithoutCancel(ctx), &done, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'DONE'`); err != nil {
			return done, finished, err
		}
	}
	return done, finished, nil
}

// check compares the table with the tracker: every task DONE and
// completed once, each one's lateness, and the orders closed.
func (r *delayRate) check(ctx context.Context) (c delayCheck, err error) {
	bg := context.WithoutCancel(ctx)
	var rows []struct {
		BizUUID string `db:"biz_uuid"`
		Status  string `db:"status"`
	}
	if err := r.env.db.SelectContext(bg, &rows, `SELECT biz_uuid, status FROM job_delay_task`); err != nil {
		return c, err
	}
	status := make([]string, r.n)
	for _, row := range rows {
		if i, ok := taskIndex(row.BizUUID); ok && i < r.n {
			status[i] = row.Status
		}
	}
	for i := range r.n {
		n := r.tr.completed[i].Load()
		if status[i] != "DONE" || n == 0 {
			c.lost++
		}
		if n > 1 {
			c.dup++
		}
		if s := r.tr.firstStart[i].Load(); s != 0 {
			l := float64(s-r.tr.executeAt[i].Load()) / 1e6
			c.late = append(c.late, l)
			// Due after a fault: those registered before it lost their
			// timer entries; the reconciler brings them back.
			for _, f := range r.faults {
				if at := r.tr.executeAt[i].Load(); f.doneNS != 0 && at >= f.doneNS {
					f.after = append(f.after, l)
				}
			}
		}
	}
	if r.orderNos != nil {
		if err := r.env.db.GetContext(bg, &c.closedOrders, `SELECT COUNT(*) FROM order_info WHERE status = 2`); err != nil {
			return c, err
		}
		if err := r.env.db.GetContext(bg, &c.closeLogs, `SELECT COUNT(*) FROM order_close_log`); err != nil {
			return c, err
		}
	}
	slices.Sort(c.late)
	return c, nil
}

// print prints the run's figures, ending with the p50_ms=… line, sets
// out's load at the end and reports whether registration overran.
func (r *delayRate) print(ctx context.Context, stdout io.Writer, reg registration, c delayCheck, done int, window float64, stopped []*delay.Dispatcher, out *delayRun) bool {
	o, n := r.o, r.n
	fmt.Fprintf(stdout, "delay bench: %d tasks due at %d/s over %s, %d dispatcher(s) x %d workers, handler %s (%s)\n",
		n, r.rate, o.duration, o.executors, o.workers, o.handler, o.mode())
	overran := printRegistration(stdout, o, reg)
	if late := c.late; len(late) > 0 {
		fmt.Fprintf(stdout, "lateness (execute time -> handler start), ms: p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  min %.1f\n",
			dbenchPercentile(late, 50), dbenchPercentile(late, 90), dbenchPercentile(late, 99), dbenchPercentile(late, 99.9),
			late[len(late)-1], late[0])
	}
	fmt.Fprintf(stdout, "throughput: %d tasks done in %.1fs from the first due time (%.0f/s); %d handler starts\n",
		done, window, float64(done)/window, r.tr.starts.Load())
	for i, d := range stopped {
		k := d.Counters()
		fmt.Fprintf(stdout, "dispatcher %d: claimed %d done %d retried %d failed %d lost-claims %d recovered %d outcomes %v\n",
			i, k.Claimed, k.Done, k.Retried, k.Failed, k.Lost, k.Recovered, k.Outcomes)
	}
	if r.orderNos != nil {
		fmt.Fprintf(stdout, "orders: %d closed, %d close-log rows (of %d)\n", c.closedOrders, c.closeLogs, n)
	}
	r.printFaults(stdout)
	dupPublish := r.printRabbitMQ(stdout)
	out.loadEnd = loadAverage()
	if r.prof != nil {
		r.prof.print(context.WithoutCancel(ctx), stdout, n)
	}
	if o.timeline > 0 {
		printTimeline(stdout, r.tr, r.firstDue, o.timeline)
	}
	fmt.Fprintf(stdout, "load average (1, 5, 15 min) at the start: %s; at the end: %s\n", out.loadStart, out.loadEnd)
	fmt.Fprintf(stdout, "lost=%d (not DONE or never completed)  dup=%d (completed more than once)\n", c.lost, c.dup)
	fmt.Fprintf(stdout, "p50_ms=%.0f p99_ms=%.0f p999_ms=%.0f lost=%d dup=%d%s\n", out.p50, out.p99, out.p999, c.lost, c.dup, dupPublish)
	return overran
}

// printFaults prints the lateness of the tasks due after each fault.
func (r *delayRate) printFaults(stdout io.Writer) {
	for _, f := range r.faults {
		slices.Sort(f.after)
		if len(f.after) > 0 {
			over := len(f.after) - sortIndexAbove(f.after, 1000)
			bound := ""
			if r.rb != nil {
				bound = fmt.Sprintf(", republish after %s", r.o.republishAfter)
			}
			fmt.Fprintf(stdout, "after %s: %d tasks due after it all ran, %d of them over 1s late, lateness max %.0f ms (reconcile interval %s%s)\n",
				f.name, len(f.after), over, f.after[len(f.after)-1], r.o.reconcile, bound)
		}
	}
}

// printRabbitMQ prints the RabbitMQ timer's counters and returns the
// dup_publish_pct field of the last line ("" with the Redis timer).
func (r *delayRate) printRabbitMQ(stdout io.Writer) string {
	if r.rb == nil {
		return ""
	}
	s := r.rb.stats()
	fmt.Fprintf(stdout, "rabbitmq: %d messages published, %d hops, %d published again by the reconciler, %d duplicates dropped at the claim (%.3f%% of tasks), %d publishes not confirmed, %d reconnects\n",
		s.Published, s.Hops, s.Republished, s.Duplicates, 100*float64(s.Duplicates)/float64(r.n), s.Failures, s.Reconnects)
	return fmt.Sprintf(" dup_publish_pct=%.3f", 100*float64(s.Duplicates)/float64(r.n))
}
