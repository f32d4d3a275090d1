package delay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// Config configures a Dispatcher. Zero values take the defaults given.
type Config struct {
	// Timer tells when tasks fall due; the dispatcher starts and stops its
	// consuming side with its own Start and Stop (the owner starts and stops
	// the timer itself, before and after). Default: the Redis timer on the
	// Redis given to NewDispatcher, under KeyPrefix.
	Timer Timer
	// KeyPrefix starts the Redis timer's keys. Default "delay:". Executors
	// sharing tasks share the prefix.
	KeyPrefix string
	// TimerShards is how many sorted sets the Redis timer is split over, so
	// that a Redis Cluster spreads it over its masters
	// (RedisTimerConfig.Shards). Default 1, the single key.
	TimerShards int
	// Handlers are the in-process handlers by name (e.g.
	// OrderTimeoutCloseHandler). Names are a letter then letters, digits,
	// '.', '_', '-'.
	Handlers map[string]HandlerFunc
	// BatchHandlers are in-process handlers that take many tasks in one
	// call, by name (e.g. OrderTimeoutCloseHandler with
	// handlers.DelayOrderCloseBatch). The claimed tasks of such a handler are
	// given to it together, at most HandlerBatchSize per call, and each
	// task's result is recorded on its own, as for Handlers. A name is in
	// Handlers or BatchHandlers, not both.
	BatchHandlers map[string]BatchHandlerFunc
	// PayloadValidators check the payload of a handler's tasks at
	// registration, by handler name (in Handlers or BatchHandlers; e.g.
	// OrderTimeoutCloseHandler with handlers.ValidateOrderPayload).
	PayloadValidators map[string]PayloadValidator
	// HandlerBatchSize is the most tasks one BatchHandlers call gets.
	// Default BatchSize; at most BatchSize.
	HandlerBatchSize int
	// Services are HTTP task targets by name: a task with handler
	// "http:{name}{path}" is POSTed to Services[name]+path. See
	// ParseServices.
	Services map[string]string
	// ServiceToken, when set, is sent to HTTP targets as
	// "Authorization: Bearer {token}".
	ServiceToken string
	// HTTPClient calls HTTP targets. Default: a client with keep-alive and
	// no timeout of its own (HandlerTimeout bounds each call).
	HTTPClient *http.Client
	// Logger is the process log; nil discards.
	Logger *slog.Logger

	// RunningTimeout: a task RUNNING longer is recovered to PENDING (its
	// dispatcher is presumed dead). A task is claimed only when a worker
	// starts it at once, so its RUNNING age is its handler's. Default 120s.
	RunningTimeout time.Duration
	// HandlerTimeout bounds each attempt. HandlerTimeout + HandlerGrace
	// must be at most 90% of RunningTimeout, so a slow handler is cancelled
	// and its result recorded before its task can be recovered and run
	// twice. Default 60s.
	HandlerTimeout time.Duration
	// HandlerGrace is how long a handler may go on after its context is
	// cancelled, for handlers that finish a step they must not cut in half
	// (the order close: orders.Closer.CancelBound). Default 0.
	HandlerGrace time.Duration
	// NotNowBackoff and NotNowBackoffMax shape the wait after an attempt
	// that said "not now" (NotNow): NotNowBackoff at first, then doubling
	// with the time since the task's execute time, up to NotNowBackoffMax.
	// Defaults 1s and 30s.
	NotNowBackoff    time.Duration
	NotNowBackoffMax time.Duration
	// NotNowMaxAge: an attempt saying "not now" this long after the task's
	// execute time counts as a failure (spending a retry), with its reason.
	// Default 1h.
	NotNowMaxAge time.Duration
	// ReconcileInterval is how often the timer is refilled from the table,
	// stuck tasks recovered and the clock offset measured. Default 30s.
	ReconcileInterval time.Duration
	// ReconcileHorizon: the reconciler schedules PENDING tasks due within
	// this much of now. Default 2 × ReconcileInterval.
	ReconcileHorizon time.Duration
	// Retention: DONE and CANCELLED tasks older than this are purged.
	// Default 168h; negative disables purging.
	Retention time.Duration
	// PurgeInterval is how often purging runs. Default 10m.
	PurgeInterval time.Duration
	// PollInterval is the longest the poller waits between looks at the
	// timer when nothing is due sooner (a task registered by another
	// process due sooner than the earliest known is seen within it).
	// Default 50ms.
	PollInterval time.Duration
	// BatchWindow is the shortest wait after a look that found fewer than
	// BatchSize tasks due, so tasks due close together are popped and
	// claimed in one batch (one claim statement instead of one each). It
	// adds up to this much lateness. Default 5ms; negative for none.
	BatchWindow time.Duration
	// BatchSize is the most tasks popped and claimed at once. Batches are
	// this large only when tasks come due faster than they are handled
	// (otherwise BatchWindow bounds them): larger ones then cost fewer
	// statements and commits per task, which is what the database's
	// capacity is spent on. Default 500 (the order close's own page);
	// at most 1000.
	BatchSize int
	// Workers is how many handlers run at once; a BatchHandlers call counts
	// as one. Default 32.
	Workers int
	// BackoffBase and BackoffMax shape retries: the n-th failure waits
	// between half and all of min(BackoffBase × 2^(n-1), BackoffMax).
	// Defaults 1s and 10m (or BackoffBase, when that is longer).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// SweepGrace: Sweep only takes tasks due for longer than this, leaving
	// the timer's own work alone. Default 10s.
	SweepGrace time.Duration
	// Observer receives each attempt's result and lateness for metrics.
	// nil: none.
	Observer Observer
}

// ErrStopped is the cause given to handlers cancelled by Stop.
var ErrStopped = errors.New("delay: dispatcher stopped")

// Dispatcher runs due tasks: it pops the timer, claims rows by CAS,
// runs handlers under a timeout, records the result, retries with backoff,
// recovers stuck claims and refills the timer from the table. Run one in
// every executor; they share work through the timer and the table.
type Dispatcher struct {
	cfg      Config
	db       *sqlx.DB
	store    store
	client   *Client
	timer    Timer
	clock    *clock
	log      *slog.Logger
	handlers map[string]HandlerFunc
	batch    map[string]BatchHandlerFunc
	http     *http.Client

	mu         sync.Mutex
	started    bool
	stopped    bool
	loopCancel context.CancelCauseFunc
	workCancel context.CancelCauseFunc
	wg         sync.WaitGroup
	done       chan struct{}

	work      chan workItem
	slots     chan struct{}
	wake      chan struct{}
	nextWake  atomic.Int64 // Unix ms the poller plans to look next
	lastPurge time.Time

	counters counters

	// afterClaim, set by tests before Start, runs between a claim's UPDATE
	// and its read-back, on the claim's connection.
	afterClaim func(ctx context.Context, conn *sqlx.Conn)
}

// NewDispatcher checks cfg, fills defaults and builds a Dispatcher (not
// started) on db, which holds job_delay_task. rdb holds the Redis timer; it
// may be nil when cfg.Timer is set.
func NewDispatcher(db *sqlx.DB, rdb redis.UniversalClient, cfg Config) (*Dispatcher, error) {
	if db == nil {
		return nil, errors.New("delay: NewDispatcher needs a database")
	}
	if rdb == nil && cfg.Timer == nil {
		return nil, errors.New("delay: NewDispatcher needs Redis or Config.Timer")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}

	d := &Dispatcher{
		cfg:      cfg,
		db:       db,
		log:      cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("component", "delay.dispatcher"),
		handlers: cfg.Handlers,
		batch:    cfg.BatchHandlers,
		http:     cfg.HTTPClient,
		done:     make(chan struct{}),
		work:     make(chan workItem),
		slots:    make(chan struct{}, cfg.Workers),
		wake:     make(chan struct{}, 1),
		counters: counters{outcomes: map[string]int64{}},
	}
	if d.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Workers
		d.http = &http.Client{Transport: tr}
	}
	c, err := NewClient(db, rdb, ClientConfig{
		Timer: cfg.Timer, KeyPrefix: cfg.KeyPrefix, TimerShards: cfg.TimerShards, RunningTimeout: cfg.RunningTimeout,
		ValidateHandler: d.ValidateHandler, ValidatePayload: d.validatePayload, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	c.onSchedule = d.scheduled
	d.client, d.timer, d.clock = c, c.timer, c.clock
	return d, nil
}

// Defaults that NewClient and the Redis timer share with Config.
const (
	defaultRunningTimeout = 120 * time.Second
	defaultTimerShards    = 1
)

// WithDefaults returns cfg with its zero settings filled with their
// defaults (those documented on each field). Config{}.WithDefaults() is
// the defaults themselves: the executor's delay.* keys show them, so each
// is declared once, here.
func (cfg Config) WithDefaults() Config {
	cfg.KeyPrefix = cmp.Or(cfg.KeyPrefix, defaultKeyPrefix)
	cfg.TimerShards = cmp.Or(cfg.TimerShards, defaultTimerShards)
	cfg.RunningTimeout = cmp.Or(cfg.RunningTimeout, defaultRunningTimeout)
	cfg.HandlerTimeout = cmp.Or(cfg.HandlerTimeout, 60*time.Second)
	cfg.ReconcileInterval = cmp.Or(cfg.ReconcileInterval, 30*time.Second)
	cfg.ReconcileHorizon = cmp.Or(cfg.ReconcileHorizon, 2*cfg.ReconcileInterval)
	cfg.Retention = cmp.Or(cfg.Retention, 168*time.Hour)
	cfg.PurgeInterval = cmp.Or(cfg.PurgeInterval, 10*time.Minute)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 50*time.Millisecond)
	cfg.BatchWindow = cmp.Or(cfg.BatchWindow, 5*time.Millisecond)
	if cfg.BatchWindow < 0 {
		cfg.BatchWindow = 0
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	cfg.HandlerBatchSize = cmp.Or(cfg.HandlerBatchSize, cfg.BatchSize)
	cfg.Workers = cmp.Or(cfg.Workers, 32)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, time.Second)
	// An unset cap is 10 minutes, or the base when that is longer.
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, max(10*time.Minute, cfg.BackoffBase))
	cfg.SweepGrace = cmp.Or(cfg.SweepGrace, 10*time.Second)
	cfg.NotNowBackoff = cmp.Or(cfg.NotNowBackoff, time.Second)
	cfg.NotNowBackoffMax = cmp.Or(cfg.NotNowBackoffMax, 30*time.Second)
	cfg.NotNowMaxAge = cmp.Or(cfg.NotNowMaxAge, time.Hour)
	return cfg
}

// check returns every problem of cfg's settings at once, and resolves
// cfg.Services' base URLs.
func (cfg *Config) check() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf("delay: "+format, args...)) }
	for name, d := range map[string]time.Duration{
		"RunningTimeout": cfg.RunningTimeout, "HandlerTimeout": cfg.HandlerTimeout,
		"ReconcileInterval": cfg.ReconcileInterval, "ReconcileHorizon": cfg.ReconcileHorizon,
		"PurgeInterval": cfg.PurgeInterval, "PollInterval": cfg.PollInterval,
		"BackoffBase": cfg.BackoffBase, "BackoffMax": cfg.BackoffMax, "SweepGrace": cfg.SweepGrace,
		"HandlerGrace": cfg.HandlerGrace, "NotNowBackoff": cfg.NotNowBackoff,
		"NotNowBackoffMax": cfg.NotNowBackoffMax, "NotNowMaxAge": cfg.NotNowMaxAge,
	} {
		if d < 0 {
			bad("%s %s is negative", name, d)
		}
	}
	if err := cfg.retrySchedule().Validate(); err != nil {
		bad("retries: %v", err)
	}
	if err := checkTimeouts(cfg.HandlerTimeout, cfg.HandlerGrace, cfg.RunningTimeout); err != nil {
		problems = append(problems, fmt.Errorf("delay: %w", err))
	}
	if err := cfg.notNowSchedule().Validate(); err != nil {
		bad("not-now waits (NotNowBackoff, NotNowBackoffMax): %v", err)
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1000 {
		bad("BatchSize %d is not in 1..1000", cfg.BatchSize)
	}
	if cfg.Workers < 1 {
		bad("Workers %d is below 1", cfg.Workers)
	}
	if cfg.HandlerBatchSize < 1 || cfg.HandlerBatchSize > cfg.BatchSize {
		bad("HandlerBatchSize %d is not in 1..BatchSize (%d)", cfg.HandlerBatchSize, cfg.BatchSize)
	}
	problems = append(problems, cfg.handlerProblems()...)
	services := make(map[string]string, len(cfg.Services))
	for name, base := range cfg.Services {
		u, err := parseService(name, base)
		if err != nil {
			bad("service %s: %v", name, err)
		}
		services[name] = u
	}
	cfg.Services = services
	return errors.Join(problems...)
}

// handlerProblems are the problems of the handler names, handlers and
// payload validators.
func (cfg *Config) handlerProblems() []error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf("delay: "+format, args...)) }
	for name, h := range cfg.BatchHandlers {
		if !handlerNameRe.MatchString(name) {
			bad("batch handler name %q is not a letter then letters, digits, . _ -", name)
		}
		if h == nil {
			bad("batch handler %q is nil", name)
		}
		if _, dup := cfg.Handlers[name]; dup {
			bad("handler %q is in both Handlers and BatchHandlers", name)
		}
	}
	for name := range cfg.Handlers {
		if !handlerNameRe.MatchString(name) {
			bad("handler name %q is not a letter then letters, digits, . _ -", name)
		}
		if cfg.Handlers[name] == nil {
			bad("handler %q is nil", name)
		}
	}
	for name, v := range cfg.PayloadValidators {
		_, single := cfg.Handlers[name]
		_, batch := cfg.BatchHandlers[name]
		if !single && !batch {
			bad("payload validator for %q, which is not in Handlers or BatchHandlers", name)
		}
		if v == nil {
			bad("payload validator %q is nil", name)
		}
	}
	return problems
}

// Client is the dispatcher's Client, which checks handler names against
// this dispatcher's handlers and services and wakes it when a task
// registered here is due sooner than it planned to look.
func (d *Dispatcher) Client() *Client { return d.client }

// ValidateHandler returns an *InvalidError unless the dispatcher can run
// the handler name.
func (d *Dispatcher) ValidateHandler(name string) error {
	if err := checkHandlerSyntax(name); err != nil {
		return err
	}
	if svc, _, ok := ParseHTTPHandler(name); ok {
		if _, known := d.cfg.Services[svc]; !known {
			return invalid("handler", "service %q is not configured (delay.services: %s)", svc, d.listServices())
		}
		return nil
	}
	if _, ok := d.batch[name]; ok {
		return nil
	}
	if _, ok := d.handlers[name]; !ok {
		return invalid("handler", "unknown handler %q (known: %s; or http:{service}/{path})", name, d.listHandlers())
	}
	return nil
}

// validatePayload runs the payload validator of the handler, if any.
func (d *Dispatcher) validatePayload(handler string, payload json.RawMessage) error {
	if v := d.cfg.PayloadValidators[handler]; v != nil {
		return v(payload)
	}
	return nil
}

func (d *Dispatcher) listHandlers() string {
	names := make([]string, 0, len(d.handlers)+len(d.batch))
	for n := range d.handlers {
		names = append(names, n)
	}
	for n := range d.batch {
		names = append(names, n)
	}
	sort.Strings(names)
	return cmp.Or(strings.Join(names, ", "), "none")
}

func (d *Dispatcher) listServices() string {
	names := make([]string, 0, len(d.cfg.Services))
	for n := range d.cfg.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	return cmp.Or(strings.Join(names, ", "), "none")
}

// Start launches the poller, the workers and the maintenance loop and
// returns. ctx bounds the start-up only (Start measures the database clock
// first and fails if the database does not answer; a Redis outage is only
// logged, the loops retry): the dispatcher takes tasks until Stop, and its
// handlers run under ctx's values.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.stopped {
		return errors.New("delay: dispatcher already started or stopped")
	}
	if err := d.clock.Sync(ctx); err != nil {
		return fmt.Errorf("delay: start: %w", err)
	}
	if err := d.timer.start(ctx, d.scheduled); err != nil {
		return fmt.Errorf("delay: start timer: %w", err)
	}
	d.started = true
	base := context.WithoutCancel(ctx)
	loopCtx, loopCancel := context.WithCancelCause(base)
	workCtx, workCancel := context.WithCancelCause(base)
	d.loopCancel, d.workCancel = loopCancel, workCancel

	var workers sync.WaitGroup
	for range d.cfg.Workers {
		workers.Go(func() {
			for it := range d.work {
				d.execute(workCtx, it)
				<-d.slots
			}
		})
	}
	d.wg.Go(func() {
		d.pollLoop(loopCtx) // closes d.work when it returns
		workers.Wait()
	})
	d.wg.Go(func() { d.maintainLoop(loopCtx) })
	go func() {
		d.wg.Wait()
		close(d.done)
	}()
	d.log.InfoContext(ctx, "delay dispatcher started", "workers", d.cfg.Workers,
		"running_timeout", d.cfg.RunningTimeout.String(), "handler_timeout", d.cfg.HandlerTimeout.String(),
		"reconcile_interval", d.cfg.ReconcileInterval.String(), "handlers", d.listHandlers(), "services", d.listServices())
	return nil
}

// Stop stops taking tasks and waits for handlers in flight until ctx is
// done; then it cancels them (with cause ErrStopped), gives their tasks back
// as PENDING without spending a retry, and waits a few seconds more. It
// returns ctx's error if it had to cancel. Safe to call twice, and before
// Start (a Start after it fails).
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.started || d.stopped {
		started := d.started
		d.stopped = true
		d.mu.Unlock()
		if started {
			<-d.done
		}
		return nil
	}
	d.stopped = true
	d.mu.Unlock()

	d.loopCancel(ErrStopped)
	defer d.http.CloseIdleConnections()
	err := d.drain(ctx)
	// Last, so that what the workers recorded is acknowledged first: what
	// the timer still holds goes back to it (RabbitMQ redelivers it to
	// another executor).
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return errors.Join(err, d.timer.stop(tctx))
}

// drain waits for the loops and workers to end until ctx is done, then
// cancels the handlers in flight and waits a few seconds more.
func (d *Dispatcher) drain(ctx context.Context) error {
	select {
	case <-d.done:
		d.log.InfoContext(ctx, "delay dispatcher stopped")
		return nil
	case <-ctx.Done():
	}
	d.workCancel(ErrStopped)
	select {
	case <-d.done:
		d.log.WarnContext(ctx, "delay dispatcher stopped; handlers in flight were cancelled")
		return fmt.Errorf("delay: stop: handlers cancelled: %w", ctx.Err())
	case <-time.After(5 * time.Second):
		return fmt.Errorf("delay: stop: handlers ignore cancellation and are still running: %w", ctx.Err())
	}
}

// notIn returns the ids of ids that none of rows has (idOf).
func notIn[T any](ids []int64, rows []T, idOf func(T) int64) []int64 {
	in := make(map[int64]bool, len(rows))
	for _, r := range rows {
		in[idOf(r)] = true
	}
	var out []int64
	for _, id := range ids {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

// scheduled is the Client's hook: a task registered here is due at
// earliest; wake the poller if it planned to look later.
func (d *Dispatcher) scheduled(earliest time.Time) {
	if earliest.UnixMilli() < d.nextWake.Load() {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// pollLoop pops due ids for free worker slots, claims them and hands them
// to the workers; when nothing is due it sleeps until the earliest timer
// entry, PollInterval at most, or a wake-up.
func (d *Dispatcher) pollLoop(ctx context.Context) {
	defer close(d.work)
	sleep := time.NewTimer(time.Hour)
	defer sleep.Stop()
	failures := 0
	// wide: the last claim took tasks of batch handlers, so pop for whole
	// batches per slot (popLimit); after a claim of single-handler tasks
	// only, pop one per slot, so that a timer full of those does not make
	// every look pop and put back far more than the slots can run.
	wide := true
	for {
		held, ok := d.holdSlots(ctx)
		if !ok {
			return
		}
		// While looking, any task scheduled meanwhile leaves a wake-up, so
		// the sleep computed from this look cannot overshoot it.
		d.nextWake.Store(math.MaxInt64)
		now := d.clock.Now()
		limit := held
		if wide {
			limit = d.popLimit(held)
		}
		// A sharded timer whose shards partly answered returns what it
		// popped with its error: those ids are claimed all the same.
		ids, next, err := d.timer.pop(ctx, now, limit)
		var items []workItem
		if len(ids) > 0 {
			items = d.group(d.claim(ctx, ids, now, held))
			if len(items) > 0 {
				wide = slices.ContainsFunc(items, func(it workItem) bool { return it.batch != nil })
			}
		}
		d.handOut(items, held)

		wait, ok := d.pollWait(ctx, err, &failures, len(ids) == limit, next)
		if !ok {
			return
		}
		if wait <= 0 {
			continue
		}
		if !d.sleep(ctx, sleep, wait) {
			return
		}
	}
}

// holdSlots holds at least one worker slot, and as many more as are free
// up to BatchSize, before popping, so popped tasks never wait in memory
// while another executor idles. It is false when ctx ended first.
func (d *Dispatcher) holdSlots(ctx context.Context) (held int, ok bool) {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, false
	}
	held = 1
	for held < d.cfg.BatchSize {
		select {
		case d.slots <- struct{}{}:
			held++
		default:
			return held, true
		}
	}
	return held, true
}

// handOut hands the claimed items to the workers, a held slot for each,
// and gives back the slots left over.
func (d *Dispatcher) handOut(items []workItem, held int) {
	for i, it := range items {
		if i >= held {
			// Not expected (popLimit and the claim keep items within
			// the slots held); wait for a worker rather than drop a
			// claimed task.
			d.slots <- struct{}{}
			held++
		}
		d.work <- it // a slot is held for each
	}
	for range held - len(items) {
		<-d.slots
	}
}

// pollWait is how long to wait before the next look: at once when the pop
// was full (more may be due), longer after each failure to reach the
// timer, else until the earliest entry, PollInterval at most. It is false
// when a failure came from ctx ending.
func (d *Dispatcher) pollWait(ctx context.Context, err error, failures *int, full bool, next time.Time) (time.Duration, bool) {
	wait := d.cfg.PollInterval
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return 0, false
		}
		*failures++
		if *failures == 1 || *failures%100 == 0 {
			d.log.WarnContext(ctx, "delay timer unreachable; tasks wait for it or for the sweep", "failures", *failures, "err", err)
		}
		wait = min(d.cfg.PollInterval*time.Duration(*failures), time.Second)
	case full:
		*failures = 0
		return 0, true // more may be due
	default:
		*failures = 0
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(d.clock.Now()), d.cfg.BatchWindow))
		}
	}
	return wait, true
}

// sleep waits for wait, a wake-up or the end of ctx (then false).
func (d *Dispatcher) sleep(ctx context.Context, sleep *time.Timer, wait time.Duration) bool {
	d.nextWake.Store(time.Now().Add(wait).UnixMilli())
	sleep.Reset(wait)
	select {
	case <-sleep.C:
	case <-d.wake:
		if !sleep.Stop() {
			<-sleep.C
		}
	case <-ctx.Done():
		return false
	}
	return true
}

// claim turns popped ids into claimed tasks. Ids that were not claimed are
// dropped, except PENDING ones (not yet due: a stale timer entry; or left
// for want of a free worker), which go back with their true time; if the
// claim itself fails (or its read-back, after which the claim is given
// back), all go back, due now, for the next claim to sort out.
// slots > 0 is how many work items the caller can run now: with batch
// handlers, the tasks claimed make at most that many (see popLimit); 0
// claims every id.
func (d *Dispatcher) claim(ctx context.Context, ids []int64, now time.Time, slots int) []*Task {
	// A claim must not be cut in half by shutdown: its rows would stay
	// RUNNING until recovered.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	claimID := rand.Int64N(1<<62) + 1
	var split *claimSplit
	if len(d.batch) > 0 && slots > 0 {
		split = &claimSplit{batchNames: d.batchNames(), singles: func(n int) int { return slots - d.groupsAtMost(n) }}
	}
	tasks, err := d.store.claim(cctx, d.db, ids, claimID, split, d.afterClaim)
	if err != nil {
		d.log.ErrorContext(ctx, "claim delayed tasks", "batch_size", len(ids), "err", err)
		back := make([]timerEntry, len(ids))
		for i, id := range ids {
			back[i] = timerEntry{ID: id, Time: now}
		}
		if _, err := d.timer.addMissing(cctx, back); err != nil {
			d.log.WarnContext(ctx, "put unclaimed ids back on the timer; the reconciler will", "err", err)
		}
		return nil
	}
	d.counters.claimed.Add(int64(len(tasks)))
	if len(tasks) < len(ids) {
		rest := notIn(ids, tasks, func(t *Task) int64 { return t.ID })
		pending, err := d.store.pendingTimes(cctx, d.db, rest)
		if err == nil {
			d.timer.done(notIn(rest, pending, func(e timerEntry) int64 { return e.ID }), true)
			if len(pending) > 0 {
				err = d.timer.add(cctx, pending...)
			}
		}
		if err != nil {
			d.log.WarnContext(ctx, "put not-yet-due tasks back on the timer; the reconciler will", "err", err)
		}
	}
	return tasks
}
