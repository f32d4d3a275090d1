package delay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/internal/sqlexec"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Timer is told of new tasks (the Dispatcher's, in an executor).
	// Default: the Redis timer on the Redis given to NewClient, under
	// KeyPrefix. Without either, registrations reach the timer through the
	// dispatchers' reconciler (within its interval).
	Timer Timer
	// KeyPrefix starts the Redis timer's keys. Default "delay:".
	KeyPrefix string
	// TimerShards is how many sorted sets the Redis timer is split over
	// (RedisTimerConfig.Shards). Default 1.
	TimerShards int
	// RunningTimeout is the age at which a RUNNING task counts as stuck in
	// Stats and Check. Default 120s.
	RunningTimeout time.Duration
	// ValidateHandler rejects handler names nothing can run. Nil accepts any
	// well-formed name (a process that only registers, for executors that
	// know the handlers).
	ValidateHandler func(name string) error
	// ValidatePayload checks a payload for its handler name (after the
	// handler is accepted). Nil accepts any JSON.
	ValidatePayload func(handler string, payload json.RawMessage) error
	// Logger receives warnings (a timer update that failed after a commit).
	// Nil discards.
	Logger *slog.Logger
}

// Client registers, reads, cancels and requeues tasks. It is safe for
// concurrent use. Use Register where the task stands alone, or RegisterTx
// inside the transaction that creates the order (so the task exists if and
// only if the order does) followed by Schedule after the commit.
type Client struct {
	db             *sqlx.DB
	store          store
	timer          Timer // nil without one
	clock          *clock
	validate       func(string) error
	validatePay    func(string, json.RawMessage) error
	runningTimeout time.Duration
	log            *slog.Logger
	// onSchedule, set by a Dispatcher in the same process, wakes its poller
	// when a task becomes due earlier than it planned to look.
	onSchedule func(earliest time.Time)
}

// defaultKeyPrefix is the default prefix of Redis keys.
const defaultKeyPrefix = "delay:"

// NewClient builds a Client on db, which holds job_delay_task. rdb, which
// may be nil, is the Redis timer's server when cfg.Timer is not set.
func NewClient(db *sqlx.DB, rdb redis.UniversalClient, cfg ClientConfig) (*Client, error) {
	if db == nil {
		return nil, errors.New("delay: NewClient needs a database")
	}
	c := &Client{
		db:             db,
		clock:          newClock(db, time.Minute),
		validate:       cfg.ValidateHandler,
		validatePay:    cfg.ValidatePayload,
		runningTimeout: cmp.Or(cfg.RunningTimeout, defaultRunningTimeout),
		log:            cfg.Logger,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Timer != nil:
		c.timer = cfg.Timer
	case rdb != nil:
		tm, err := NewRedisTimer(rdb, RedisTimerConfig{KeyPrefix: cfg.KeyPrefix, Shards: cfg.TimerShards})
		if err != nil {
			return nil, err
		}
		c.timer = tm
	}
	return c, nil
}

// newTraceID returns 32 hex digits (128 random bits, the W3C trace-id form).
func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newTask validates r and builds the row to insert, with times from the
// database clock.
func (c *Client) newTask(ctx context.Context, r Registration) (*Task, error) {
	if err := validBizUUID(r.BizUUID); err != nil {
		return nil, err
	}
	if err := checkHandlerSyntax(r.Handler); err != nil {
		return nil, err
	}
	if c.validate != nil {
		if err := c.validate(r.Handler); err != nil {
			return nil, err
		}
	}
	payload, err := marshalPayload(r.Payload)
	if err != nil {
		return nil, err
	}
	if c.validatePay != nil {
		if err := c.validatePay(r.Handler, payload); err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				err = invalid("payload", "%v", err)
			}
			return nil, err
		}
	}
	maxRetry := r.MaxRetry
	switch {
	case maxRetry == 0:
		maxRetry = DefaultMaxRetry
	case maxRetry < 0:
		maxRetry = 0
	case maxRetry > MaxMaxRetry:
		return nil, invalid("maxRetry", "%d is above %d", maxRetry, MaxMaxRetry)
	}
	now, err := c.clock.NowSynced(ctx)
	if err != nil {
		return nil, err
	}
	at := r.ExecuteTime
	if at.IsZero() {
		if r.Delay < 0 {
			return nil, invalid("delayMs", "%d is negative", r.Delay.Milliseconds())
		}
		at = now.Add(r.Delay)
	}
	at = at.UTC().Truncate(time.Millisecond)
	if at.After(now.Add(MaxDelay)) {
		return nil, invalid("executeTime", "%s is more than %s ahead", at.Format(time.RFC3339), MaxDelay)
	}
	if at.Year() < 2000 {
		return nil, invalid("executeTime", "%s is before 2000", at.Format(time.RFC3339))
	}
	return &Task{
		TraceID:         newTraceID(),
		BizUUID:         r.BizUUID,
		Handler:         r.Handler,
		ExecuteTime:     at,
		NextAttemptTime: at,
		Payload:         payload,
		Status:          StatusPending,
		MaxRetry:        maxRetry,
		CreatedAt:       now,
		UpdatedAt:       now,
	}, nil
}

// RegisterTx inserts the task inside the caller's transaction (or on any
// sqlx.ExtContext) and returns it with created=true, or, when its bizUuid
// exists, the existing task with created=false and nothing changed. It does
// not touch the timer: call Schedule after the commit (or let the
// reconciler find the task). Invalid input returns an *InvalidError.
func (c *Client) RegisterTx(ctx context.Context, tx sqlx.ExtContext, r Registration) (*Task, bool, error) {
	t, err := c.newTask(ctx, r)
	if err != nil {
		return nil, false, err
	}
	for range 3 {
		err = c.store.insert(ctx, tx, t)
		if err == nil {
			return t, true, nil
		}
		if !isDuplicateKey(err) {
			return nil, false, fmt.Errorf("register task %s: %w", r.BizUUID, err)
		}
		// The locking read sees the committed winner even inside a
		// transaction whose snapshot is older.
		existing, gerr := c.store.get(ctx, tx, r.BizUUID, true)
		if gerr == nil {
			return existing, false, nil
		}
		if !errors.Is(gerr, ErrNotFound) {
			return nil, false, gerr
		}
		// Not the bizUuid: a trace id collision (or a racing insert that
		// rolled back). Try again with a new trace id.
		t.TraceID = newTraceID()
	}
	return nil, false, fmt.Errorf("register task %s: %w", r.BizUUID, err)
}

// Register inserts the task in its own transaction and tells the timer. A
// second registration of a bizUuid returns the first task (created=false)
// and changes nothing in the table. A timer that cannot be reached is
// logged, not returned: the task is durable and the reconciler schedules it.
func (c *Client) Register(ctx context.Context, r Registration) (*Task, bool, error) {
	t, created, err := c.RegisterTx(ctx, c.db, r)
	if isDeadlock(err) {
		t, created, err = c.registeredMeanwhile(ctx, r, err)
	}
	if err != nil {
		return nil, false, err
	}
	if t.Status == StatusPending {
		if err := c.schedule(ctx, !created, t); err != nil {
			c.log.WarnContext(ctx, "timer not told of a new task; the reconciler will schedule it",
				"trace_id", t.TraceID, "biz_uuid", t.BizUUID, "err", err)
		}
	}
	return t, created, nil
}

// registeredMeanwhile settles a registration whose insert failed with 1213
// (err). On a Galera cluster that is how a registration of the same
// bizUuid through another node at the same moment ends, where one server
// answers 1062: the other node's row won certification. Once this node has
// applied it (a causal read) the registration is a duplicate of it; when
// no such row is there, the 1213 was a deadlock and the registration is
// tried once more.
func (c *Client) registeredMeanwhile(ctx context.Context, r Registration, err error) (*Task, bool, error) {
	var existing *Task
	gerr := sqlexec.CausalRead(ctx, c.db, func(q sqlx.QueryerContext) error {
		var err error
		existing, err = c.store.get(ctx, q, r.BizUUID, false)
		return err
	})
	switch {
	case gerr == nil:
		return existing, false, nil
	case !errors.Is(gerr, ErrNotFound):
		return nil, false, errors.Join(err, gerr)
	}
	return c.RegisterTx(ctx, c.db, r)
}

// Schedule tells the timer about tasks committed with RegisterTx. It is
// safe to call more than once and for tasks that are no longer PENDING (the
// claim drops them). An error means only that the timer learns of them
// later, through the reconciler.
func (c *Client) Schedule(ctx context.Context, tasks ...*Task) error {
	return c.schedule(ctx, false, tasks...)
}

func (c *Client) schedule(ctx context.Context, onlyMissing bool, tasks ...*Task) error {
	entries := make([]timerEntry, 0, len(tasks))
	var earliest time.Time
	for _, t := range tasks {
		if t == nil || t.Status != StatusPending {
			continue
		}
		entries = append(entries, timerEntry{ID: t.ID, Time: t.NextAttemptTime, Attempt: t.RetryCount + 1})
		if earliest.IsZero() || t.NextAttemptTime.Before(earliest) {
			earliest = t.NextAttemptTime
		}
	}
	if len(entries) == 0 {
		return nil
	}
	var err error
	if c.timer != nil {
		if onlyMissing {
			_, err = c.timer.addMissing(ctx, entries)
		} else {
			err = c.timer.add(ctx, entries...)
		}
	}
	if c.onSchedule != nil {
		c.onSchedule(earliest)
	}
	return err
}

// Get returns the task with the bizUuid, or ErrNotFound.
func (c *Client) Get(ctx context.Context, bizUUID string) (*Task, error) {
	if err := lookupBizUUID(bizUUID); err != nil {
		return nil, err
	}
	return c.store.get(ctx, c.db, bizUUID, false)
}

// Cancel cancels a PENDING (or FAILED) task, e.g. when the order is paid,
// and returns it. Cancelling a CANCELLED task returns it unchanged. A task
// RUNNING or DONE cannot be cancelled: the task is returned with
// ErrConflict. An unknown bizUuid returns ErrNotFound.
func (c *Client) Cancel(ctx context.Context, bizUUID string) (*Task, error) {
	return c.CancelTx(ctx, c.db, bizUUID)
}

// CancelTx is Cancel inside the caller's transaction (e.g. the one that
// marks the order paid).
func (c *Client) CancelTx(ctx context.Context, tx sqlx.ExtContext, bizUUID string) (*Task, error) {
	if err := lookupBizUUID(bizUUID); err != nil {
		return nil, err
	}
	ok, err := c.store.cancel(ctx, tx, bizUUID)
	if err != nil {
		return nil, fmt.Errorf("cancel task %s: %w", bizUUID, err)
	}
	t, err := c.store.get(ctx, tx, bizUUID, !ok)
	if err != nil {
		return nil, err
	}
	if !ok && t.Status != StatusCancelled {
		return t, fmt.Errorf("cancel task %s in state %s: %w", bizUUID, t.Status, ErrConflict)
	}
	return t, nil
}

// Requeue gives a FAILED task a fresh set of retries, due now, and tells
// the timer. Other states return the task with ErrConflict.
func (c *Client) Requeue(ctx context.Context, bizUUID string) (*Task, error) {
	if err := lookupBizUUID(bizUUID); err != nil {
		return nil, err
	}
	ok, err := c.store.requeue(ctx, c.db, bizUUID)
	if err != nil {
		return nil, fmt.Errorf("requeue task %s: %w", bizUUID, err)
	}
	t, err := c.store.get(ctx, c.db, bizUUID, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return t, fmt.Errorf("requeue task %s in state %s: %w", bizUUID, t.Status, ErrConflict)
	}
	if err := c.Schedule(ctx, t); err != nil {
		c.log.WarnContext(ctx, "timer not told of a requeued task; the reconciler will schedule it",
			"trace_id", t.TraceID, "biz_uuid", t.BizUUID, "err", err)
	}
	return t, nil
}
