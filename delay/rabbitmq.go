package delay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/orderjob/executor/internal/rabbit"
)

// RabbitMQConfig configures a RabbitMQ timer.
type RabbitMQConfig struct {
	// URL is the broker: amqp://user:password@host:5672/vhost. Required.
	URL string
	// Prefix starts the names of the timer's exchange and queues
	// ({prefix}hop, {prefix}ready, {prefix}wait.1s ... {prefix}wait.65536s).
	// Default "delay.". Executors sharing tasks share it.
	Prefix string
	// Prefetch is the most messages a dispatcher holds unacknowledged: the
	// tasks due within the next second (held in memory until due), those
	// being claimed and run, and hops waiting for their confirm. Keep it
	// above twice the tasks due per second per executor. Default 10000; at
	// most 65535.
	Prefetch int
	// RepublishAfter: the reconciler publishes a PENDING task again when its
	// publish was never confirmed and its row is older than this (the
	// broker was unreachable, a confirm was lost), or when it is overdue by
	// more than this and last published longer ago (its message was
	// purged or lost), the latter only while the dispatcher keeps up (the
	// ready queue is empty). The claim absorbs the duplicates this makes.
	// Default 10s.
	RepublishAfter time.Duration
	// Logger is the process log; nil discards.
	Logger *slog.Logger
}

// RabbitMQStats are a RabbitMQ timer's running totals.
type RabbitMQStats struct {
	Connected   bool  // the publishing connection is up with the topology declared
	Consuming   bool  // the dispatcher's consuming connection is up (false when not started)
	Published   int64 // tasks' messages confirmed (registration, rescheduling, reconciler)
	Republished int64 // of those, by the reconciler
	Hops        int64 // messages sent on to their next tier
	Duplicates  int64 // messages of tasks already claimed or no longer PENDING
	Failures    int64 // publishes not confirmed (left to the reconciler)
	Reconnects  int64 // connections re-established after a loss
	Held        int64 // messages held unacknowledged now (due within a second, or being run)
}

var _ Timer = (*RabbitMQTimer)(nil)

// RabbitMQTimer is the Timer kept in RabbitMQ delay-tier queues (see
// NewRabbitMQTimer). Its owner starts it before the Dispatcher and stops it
// after.
type RabbitMQTimer struct {
	cfg   RabbitMQConfig
	db    *sqlx.DB
	store store
	names rabbitNames
	clock *clock
	log   *slog.Logger
	pub   *rabbit.Session

	// confirms are publishes of add waiting for their confirm; marks the
	// confirmed ones waiting for their published_at write.
	confirms    chan pendingPublish
	marks       chan timerEntry
	runMu       sync.Mutex // Start and Stop
	stopped     bool       // a Start after Stop fails
	stopConfirm context.CancelFunc
	confirmWG   sync.WaitGroup
	stopOwn     context.CancelFunc
	ownWG       sync.WaitGroup
	started     atomic.Bool

	// The consuming side, between a Dispatcher's start and stop.
	consMu sync.Mutex
	cons   *rabbit.Session
	wake   func(due time.Time)
	hops   chan hopInFlight
	consWG sync.WaitGroup
	held   heldSet

	published, republished, hopped, dups atomic.Int64
}

// WithDefaults returns cfg with its zero settings filled with their
// defaults. RabbitMQConfig{}.WithDefaults() is the defaults themselves: the
// executor's delay.rabbitmq.* keys show them, so each is declared once, here.
func (cfg RabbitMQConfig) WithDefaults() RabbitMQConfig {
	cfg.Prefix = cmp.Or(cfg.Prefix, "delay.")
	cfg.Prefetch = cmp.Or(cfg.Prefetch, 10000)
	cfg.RepublishAfter = cmp.Or(cfg.RepublishAfter, 10*time.Second)
	return cfg
}

// NewRabbitMQTimer checks cfg and builds the timer (not started) on db,
// which holds job_delay_task: the timer writes a task's published_at once
// the broker confirmed its message. It declares its topology on every
// connect: quorum queues, so RabbitMQ 3.10 or later.
func NewRabbitMQTimer(db *sqlx.DB, cfg RabbitMQConfig) (*RabbitMQTimer, error) {
	if db == nil {
		return nil, errors.New("delay: NewRabbitMQTimer needs a database")
	}
	cfg = cfg.WithDefaults()
	if cfg.Prefetch < 1 || cfg.Prefetch > 65535 {
		return nil, fmt.Errorf("delay: RabbitMQ prefetch %d is not in 1..65535", cfg.Prefetch)
	}
	if cfg.RepublishAfter < time.Second {
		return nil, fmt.Errorf("delay: RabbitMQ RepublishAfter %s is below 1s", cfg.RepublishAfter)
	}
	if !rabbitNameRe.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("delay: RabbitMQ prefix %q is not letters, digits, '.', '_', '-' (at most 200)", cfg.Prefix)
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("component", "delay.rabbitmq")
	t := &RabbitMQTimer{cfg: cfg, db: db, names: rabbitNames{prefix: cfg.Prefix}, clock: newClock(db, time.Minute), log: log,
		confirms: make(chan pendingPublish, 65536), marks: make(chan timerEntry, 65536)}
	var err error
	t.pub, err = rabbit.New(rabbit.Config{URL: cfg.URL, Name: cfg.Prefix + "publish", Declare: t.names.declare,
		ConfirmTimeout: 5 * time.Second, Logger: log})
	if err != nil {
		return nil, err
	}
	t.held.init()
	return t, nil
}

// Start connects (in the background: a broker that does not answer is
// logged and retried, and Check fails meanwhile) and starts writing
// published_at. The timer runs until Stop.
func (t *RabbitMQTimer) Start(ctx context.Context) error {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if t.stopped || !t.started.CompareAndSwap(false, true) {
		return errors.New("delay: RabbitMQ timer already started or stopped")
	}
	if err := t.clock.Sync(ctx); err != nil {
		t.log.WarnContext(ctx, "measure database clock for the RabbitMQ timer; using the local clock until it answers", "err", err)
	}
	base := context.WithoutCancel(ctx)
	markCtx, stopOwn := context.WithCancel(base)
	confirmCtx, stopConfirm := context.WithCancel(base)
	t.stopOwn, t.stopConfirm = stopOwn, stopConfirm
	t.pub.Start(ctx)
	if err := t.pub.Err(); err != nil {
		t.log.ErrorContext(ctx, "RabbitMQ timer not connected; tasks wait in the table for the reconciler", "err", err)
	}
	t.ownWG.Go(func() { t.markLoop(markCtx) })
	t.confirmWG.Go(func() { t.confirmLoop(confirmCtx) })
	return nil
}

// Stop stops the consuming side if a Dispatcher left it running, waits for
// the confirms of what was published, writes the published_at marks still
// waiting and closes the connection. Safe twice and before Start.
func (t *RabbitMQTimer) Stop(ctx context.Context) error {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	t.stopped = true
	err := t.stop(ctx)
	if t.stopOwn != nil {
		t.stopConfirm()
		t.confirmWG.Wait()
		t.stopOwn()
		t.ownWG.Wait()
	}
	return errors.Join(err, t.pub.Stop(ctx))
}

// Check is the readiness check: nil while the broker is connected with the
// topology declared (and, while a Dispatcher runs, its consumer too);
// otherwise why not, e.g. a *rabbit.TopologyError when a queue of the same
// name exists with other arguments.
func (t *RabbitMQTimer) Check(context.Context) error {
	if !t.started.Load() {
		return errors.New("delay: RabbitMQ timer not started")
	}
	if err := t.pub.Err(); err != nil {
		return err
	}
	t.consMu.Lock()
	cons := t.cons
	t.consMu.Unlock()
	if cons != nil {
		if err := cons.Err(); err != nil {
			return fmt.Errorf("consumer of %s: %w", t.names.ready(), err)
		}
	}
	return nil
}

// Consumes reports whether a Dispatcher runs on the timer (its consuming
// side is open).
func (t *RabbitMQTimer) Consumes() bool {
	t.consMu.Lock()
	defer t.consMu.Unlock()
	return t.cons != nil
}

// Stats returns the running totals.
func (t *RabbitMQTimer) Stats() RabbitMQStats {
	ps := t.pub.Stats()
	s := RabbitMQStats{Connected: ps.Connected, Published: t.published.Load(), Republished: t.republished.Load(),
		Hops: t.hopped.Load(), Duplicates: t.dups.Load(), Failures: ps.PubFailed,
		Reconnects: max(ps.Connects-1, 0), Held: int64(t.held.len())}
	t.consMu.Lock()
	if t.cons != nil {
		cs := t.cons.Stats()
		s.Consuming = cs.Connected
		s.Reconnects += max(cs.Connects-1, 0)
	}
	t.consMu.Unlock()
	return s
}

// publish sends the messages of entries, each routed for the time it has
// left, waits for their confirms and returns the entries confirmed.
func (t *RabbitMQTimer) publish(ctx context.Context, entries []timerEntry) ([]timerEntry, error) {
	now := t.clock.Now()
	msgs := make([]rabbit.Message, len(entries))
	for i, e := range entries {
		msgs[i] = t.names.publishing(e, e.Time.Sub(now))
	}
	errs, err := t.pub.Publish(ctx, msgs)
	confirmed := make([]timerEntry, 0, len(entries))
	for i, e := range errs {
		if e == nil {
			confirmed = append(confirmed, entries[i])
		}
	}
	t.published.Add(int64(len(confirmed)))
	if err != nil {
		return confirmed, fmt.Errorf("rabbitmq timer: %d of %d messages not confirmed: %w", len(entries)-len(confirmed), len(entries), err)
	}
	return confirmed, nil
}

// add publishes entries, or, for an id this process popped and still
// holds, moves that message on instead (held again when due within a
// second, sent to its next tier otherwise): one message per schedule. It
// does not wait for the confirms of what it publishes: the row is already
// the truth, and the confirm only writes published_at (without it, the
// reconciler publishes the task again), so a registration costs no broker
// round trip. A message it cannot send (the broker unreachable) is an
// error.
func (t *RabbitMQTimer) add(ctx context.Context, entries ...timerEntry) error {
	var failed []error
	now := t.clock.Now()
	for _, e := range entries {
		if t.rehold(ctx, e) {
			continue
		}
		p := t.pub.PublishAsync(ctx, t.names.publishing(e, e.Time.Sub(now)))
		if err := p.Failed(); err != nil {
			failed = append(failed, err)
			continue
		}
		t.confirms <- pendingPublish{p: p, e: e}
	}
	if len(failed) > 0 {
		return fmt.Errorf("rabbitmq timer: %d of %d messages not sent: %w", len(failed), len(entries), failed[0])
	}
	return nil
}

// pendingPublish is a message of add awaiting its confirm.
type pendingPublish struct {
	p *rabbit.Pending
	e timerEntry
}

// confirmLoop waits for the confirms of add's messages, in order, and
// queues the published_at marks of those confirmed; at the end, it waits
// for what was sent before.
func (t *RabbitMQTimer) confirmLoop(ctx context.Context) {
	failures := 0
	settle := func(pp pendingPublish) {
		if err := pp.p.Wait(context.WithoutCancel(ctx)); err != nil {
			if failures++; failures == 1 || failures%1000 == 0 {
				t.log.WarnContext(ctx, "delayed-task message not confirmed; the reconciler will publish it again",
					"task_id", pp.e.ID, "failures", failures, "err", err)
			}
			return
		}
		failures = 0
		t.published.Add(1)
		t.mark(pp.e)
	}
	for {
		select {
		case pp := <-t.confirms:
			settle(pp)
		case <-ctx.Done():
			for {
				select {
				case pp := <-t.confirms:
					settle(pp)
				default:
					return
				}
			}
		}
	}
}

// addMissing re-holds the popped ids among entries. It publishes nothing
// for the others: a queue has no membership test, so a message may exist;
// the reconciler publishes what the table says was never confirmed.
func (t *RabbitMQTimer) addMissing(ctx context.Context, entries []timerEntry) (int64, error) {
	var n int64
	for _, e := range entries {
		if t.rehold(ctx, e) {
			n++
		}
	}
	return n, nil
}

// pop hands out held messages that are due (and sends on again those
// whose hop failed).
func (t *RabbitMQTimer) pop(ctx context.Context, now time.Time, n int) ([]int64, time.Time, error) {
	if err := t.pub.Err(); err != nil && t.held.len() == 0 {
		return nil, time.Time{}, err
	}
	ids, resend, next := t.held.pop(now, n)
	if len(resend) > 0 {
		t.resend(ctx, resend)
	}
	return ids, next, nil
}

// done acknowledges the messages of popped ids.
func (t *RabbitMQTimer) done(ids []int64, dup bool) {
	for _, id := range ids {
		h, ok := t.held.take(id)
		if !ok {
			continue
		}
		if dup {
			t.dups.Add(1)
		}
		t.ack(h.d)
	}
}

func (t *RabbitMQTimer) ack(d rabbit.Delivery) {
	t.consMu.Lock()
	cons := t.cons
	t.consMu.Unlock()
	if cons == nil {
		return // stopped: the broker redelivers it
	}
	if err := cons.Ack(d); err != nil && !errors.Is(err, rabbit.ErrStale) {
		t.log.Warn("acknowledge a delayed-task message; the broker will deliver it again", "err", err)
	}
}

// size counts the messages in the timer's queues (not those delivered and
// unacknowledged) plus those held here.
func (t *RabbitMQTimer) size(context.Context) (int64, error) {
	var total int64
	err := t.pub.Inspect(func(ch *amqp.Channel) error {
		for _, q := range t.names.queues() {
			info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				return fmt.Errorf("inspect queue %s: %w", q, err)
			}
			total += int64(info.Messages)
		}
		return nil
	})
	return total + int64(t.held.len()), err
}

// readyDepth is how many messages wait in the ready queue for a consumer.
func (t *RabbitMQTimer) readyDepth() (int, error) {
	var n int
	err := t.pub.Inspect(func(ch *amqp.Channel) error {
		info, err := ch.QueueDeclarePassive(t.names.ready(), true, false, false, false, nil)
		n = info.Messages
		return err
	})
	return n, err
}

// Queues lists the timer's queues: the delay tiers, shortest first, then
// the ready queue.
func (t *RabbitMQTimer) Queues() []string { return t.names.queues() }

// DeleteTopology deletes the timer's queues (with the messages in them)
// and exchange, for an operator leaving the RabbitMQ timer, and for tests.
// PENDING tasks stay in the table; another timer's reconciler schedules
// them.
func (t *RabbitMQTimer) DeleteTopology(context.Context) error {
	return t.pub.Inspect(t.names.deleteAll)
}
