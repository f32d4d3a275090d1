package outbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/redact"
	"github.com/orderjob/executor/internal/sqlexec"
)

// RelayConfig configures a Relay. Zero values take the defaults given.
type RelayConfig struct {
	// Endpoints maps each event type to the URL its events are POSTed to:
	// EventStockRelease to the inventory service, EventCouponRestore to the
	// coupon service. Both are required.
	Endpoints map[string]string
	// Token, if set, is sent in TokenHeader with every delivery.
	Token string
	// TokenHeader carries Token. Default "X-Service-Token".
	TokenHeader string
	// Client sends the deliveries. Default: a client of its own with
	// keep-alive and no overall timeout (Timeout bounds each delivery).
	Client *http.Client
	// Logger is the process log. Default: discard.
	Logger *slog.Logger

	// Timeout bounds each delivery. Default 5s.
	Timeout time.Duration
	// BatchSize is the most events claimed at once. Default 100, at most
	// 1000.
	BatchSize int
	// Workers is how many deliveries run at once. Default 8.
	Workers int
	// PollInterval is the wait between claims when the last one found less
	// than a full batch. Default 1s.
	PollInterval time.Duration
	// ClaimTTL is how long a claim keeps other relays off its events. A
	// delivery is only started while it can finish (Timeout) a second
	// before the claim ends; the rest of a batch is given back. Must exceed
	// Timeout by at least 2s. Default 2m, or 4 × Timeout if that is more.
	ClaimTTL time.Duration
	// BackoffBase and BackoffMax shape retries: after the n-th failed
	// attempt the event waits between half and all of
	// min(BackoffBase × 2^(n-1), BackoffMax). Defaults 1s and 10m.
	BackoffBase, BackoffMax time.Duration
	// MaxAttempts: an event whose MaxAttempts-th attempt fails is parked
	// (status parked, for an operator to requeue) instead of retried. An
	// answer that retrying cannot change (400, 401, 403, 404, 409, 410, 422:
	// see permanentStatus) parks it at once. Default 20; -1 never parks
	// after failed attempts (permanent answers still park).
	MaxAttempts int
	// Retention: delivered events older than this are deleted. Default
	// 168h; negative keeps them.
	Retention time.Duration
}

// RelayStats counts what a relay did.
type RelayStats struct {
	Claimed   int // events claimed
	Delivered int // acknowledged (2xx) and marked done by this relay
	Failed    int // attempts that failed; a retry is scheduled
	Released  int // claimed but not sent before the claim's end, given back
	Parked    int // refused for good or out of attempts: parked for an operator
	// Superseded are events acknowledged to this relay after its claim had
	// run out and passed to another relay, which marks them (receivers
	// dedupe the second delivery).
	Superseded int
	// ClaimsLost are claims rolled back by a deadlock or, on a Galera
	// cluster with relays on several nodes, by another node's claim of the
	// same events (1213: SKIP LOCKED skips only this node's locks). Not an
	// error: the claim is tried again.
	ClaimsLost int
	// PassErrors are the passes of a started relay that ended with an
	// error: the claim or a bookkeeping write failed, most often because
	// its database does not answer. The relay keeps polling.
	PassErrors int
}

func (s *RelayStats) add(o RelayStats) {
	s.Claimed += o.Claimed
	s.Delivered += o.Delivered
	s.Failed += o.Failed
	s.Released += o.Released
	s.Parked += o.Parked
	s.Superseded += o.Superseded
	s.ClaimsLost += o.ClaimsLost
	s.PassErrors += o.PassErrors
}

// Relay delivers order_outbox events to the inventory and coupon services
// after their close committed: it claims due events, POSTs each to its
// endpoint, marks it done on a 2xx answer and otherwise schedules a retry
// with exponential backoff, until the event is acknowledged, or parks it
// (MaxAttempts failures, or at once an answer retrying cannot change: see
// permanentStatus) for an operator to requeue (Ops).
// Delivery is at least once: an acknowledgement lost on the way, or a relay
// that dies before marking, means the event is sent again, with the same
// Idempotency-Key. Run one in every executor; relays share the work through
// their claims, and no event is sent by two relays at once.
//
// Each delivery:
//
//	POST {endpoint of the event type}
//	Content-Type: application/json
//	Idempotency-Key: {orderNo}:{eventType}
//	X-Trace-Id: {the event's trace id}
//	X-Event-Type: stock.release | coupon.restore
//	X-Outbox-Id: {order_outbox.id}
//	X-Delivery-Attempt: {1, 2, ...}
//	{TokenHeader}: {Token}                      (when a token is set)
//	{the event's payload: StockReleaseEvent or CouponRestoreEvent}
//
// A 2xx answer acknowledges the event; any other answer, a timeout or a
// transport error is a failed attempt (a *deliveryError for an answer).
type Relay struct {
	db     *sqlx.DB
	store  store
	cfg    RelayConfig
	client *http.Client
	log    *slog.Logger

	mu         sync.Mutex
	stats      RelayStats
	started    bool
	stopped    bool
	loopCancel context.CancelCauseFunc
	workCancel context.CancelCauseFunc
	done       chan struct{}
	lastPurge  time.Time
}

// errRelayStopped is the cause given to deliveries cancelled by Stop.
var errRelayStopped = errors.New("orders: relay stopped")

// claimMargin is how long before its claim's end a relay stops starting
// deliveries, beyond the delivery Timeout: room for clock-rate differences
// and the claim statement's own round trip.
const claimMargin = time.Second

// Defaults of RelayConfig that are also the executor's
// (order.compensation.tokenHeader, outbox.maxAttempts): config takes them
// from here.
const (
	DefaultTokenHeader = "X-Service-Token"
	DefaultMaxAttempts = 20
)

// NewRelay checks cfg and returns a Relay over db (not started).
func NewRelay(db *sqlx.DB, cfg RelayConfig) (*Relay, error) {
	if db == nil {
		return nil, errors.New("orders: NewRelay needs a database")
	}
	var problems []error
	for _, t := range []string{EventStockRelease, EventCouponRestore} {
		u, err := url.Parse(cfg.Endpoints[t])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("orders: relay endpoint of %s %q is not an http(s) URL", t, cfg.Endpoints[t]))
		}
	}
	cfg.TokenHeader = cmp.Or(cfg.TokenHeader, DefaultTokenHeader)
	cfg.Timeout = cmp.Or(cfg.Timeout, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	cfg.Workers = cmp.Or(cfg.Workers, 8)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.ClaimTTL = cmp.Or(cfg.ClaimTTL, max(2*time.Minute, 4*cfg.Timeout))
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, time.Second)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, 10*time.Minute)
	cfg.Retention = cmp.Or(cfg.Retention, 168*time.Hour)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	if cfg.Timeout < 0 || cfg.PollInterval < 0 {
		problems = append(problems, errors.New("orders: relay timeout and poll interval must be positive"))
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > 1000 {
		problems = append(problems, fmt.Errorf("orders: relay batch size %d out of [1, 1000]", cfg.BatchSize))
	}
	if cfg.MaxAttempts < -1 {
		problems = append(problems, fmt.Errorf("orders: relay max attempts %d: need a positive number, or -1 for no limit", cfg.MaxAttempts))
	}
	if cfg.Workers < 1 || cfg.Workers > 256 {
		problems = append(problems, fmt.Errorf("orders: relay workers %d out of [1, 256]", cfg.Workers))
	}
	if cfg.ClaimTTL < cfg.Timeout+2*claimMargin {
		problems = append(problems, fmt.Errorf("orders: relay claim TTL %v must exceed the timeout %v by 2s", cfg.ClaimTTL, cfg.Timeout))
	}
	if err := cfg.retrySchedule().Validate(); err != nil {
		problems = append(problems, fmt.Errorf("orders: relay: %w", err))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Workers
		client = &http.Client{Transport: tr}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{db: db, cfg: cfg, client: client, log: log.With("component", "orders.relay"), done: make(chan struct{})}, nil
}

// Stats returns what the relay has done since it was built.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Backlog is what waits in order_outbox, all relays' together.
type Backlog struct {
	Pending   int           // events not yet delivered (parked ones not counted)
	OldestAge time.Duration // how long ago the oldest of them was written (0: none)
	Parked    int           // events the relays stopped trying, for an operator
}

// Backlog reads the events not yet delivered and the parked ones (all
// relays'), for gauges.
func (r *Relay) Backlog(ctx context.Context) (Backlog, error) {
	return r.store.backlog(ctx, r.db)
}

// Start launches the relay's loop and returns. The loop keeps ctx's values
// but not its cancellation: only Stop stops it, so a shutting-down executor
// still delivers the events its last close jobs write, until it calls Stop
// after them.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return errors.New("orders: relay already started or stopped")
	}
	r.started = true
	base := context.WithoutCancel(ctx)
	loopCtx, loopCancel := context.WithCancelCause(base)
	workCtx, workCancel := context.WithCancelCause(base)
	r.loopCancel, r.workCancel = loopCancel, workCancel
	go r.loop(loopCtx, workCtx)
	return nil
}

// Stop stops claiming, lets the deliveries in flight finish and waits for
// the loop to exit. If ctx ends first, the deliveries are cancelled (their
// events are retried later) and Stop waits for them to return. Claimed
// events not yet sent are given back. Safe to call twice, and without Start.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started || r.stopped {
		r.stopped = true
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	r.mu.Unlock()

	r.loopCancel(errRelayStopped)
	var err error
	select {
	case <-r.done:
	case <-ctx.Done():
		err = ctx.Err()
		r.workCancel(errRelayStopped)
		<-r.done
	}
	r.workCancel(errRelayStopped)
	r.client.CloseIdleConnections()
	return err
}

// passWarnEvery is how many failed passes in a row go by between two
// warnings: a database that is down for an hour fails a pass every
// PollInterval, and one line a minute says as much as sixty.
const passWarnEvery = 60

// notePass counts a failed pass and warns of the first of a run of
// failures and of every passWarnEvery-th after it; the first pass that
// succeeds again says how many failed.
func (r *Relay) notePass(ctx context.Context, err error, failures *int) {
	if err == nil {
		if *failures > 0 {
			r.log.InfoContext(ctx, "outbox relay passes succeed again", "failed_passes", *failures)
		}
		*failures = 0
		return
	}
	r.mu.Lock()
	r.stats.PassErrors++
	r.mu.Unlock()
	*failures++
	if *failures == 1 || *failures%passWarnEvery == 0 {
		r.log.WarnContext(ctx, "outbox relay pass failed", "failed_passes", *failures, "error", err.Error())
	}
}

// loop claims and delivers batches until loopCtx ends: at once again after
// a full batch, otherwise after PollInterval.
func (r *Relay) loop(loopCtx, workCtx context.Context) {
	defer close(r.done)
	failures := 0 // passes failed in a row
	for {
		st, err := r.runOnce(loopCtx, workCtx)
		if loopCtx.Err() == nil {
			r.notePass(loopCtx, err, &failures)
		}
		if st.Claimed > 0 {
			r.log.DebugContext(loopCtx, "outbox relay pass", "num_claimed", st.Claimed, "num_delivered", st.Delivered,
				"num_failed", st.Failed, "num_released", st.Released)
		}
		r.purge(loopCtx)
		if loopCtx.Err() != nil {
			return
		}
		if err == nil && st.Claimed == r.cfg.BatchSize {
			continue
		}
		t := time.NewTimer(r.cfg.PollInterval)
		select {
		case <-loopCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// RunOnce claims one batch of due events, delivers it and returns what it
// did. Deliveries are not started once ctx is cancelled (their events are
// given back); deliveries in flight finish. Start runs it in a loop; tests
// and tools may call it directly.
func (r *Relay) RunOnce(ctx context.Context) (RelayStats, error) {
	return r.runOnce(ctx, context.WithoutCancel(ctx))
}

// runOnce is RunOnce with separate contexts: claimCtx stops the claim and
// the start of deliveries, workCtx cancels deliveries in flight.
func (r *Relay) runOnce(claimCtx, workCtx context.Context) (RelayStats, error) {
	var st RelayStats
	claimID := rand.Int64N(1<<62) + 1
	start := time.Now() // before the claim: the claim ends no earlier than start + ClaimTTL
	evs, err := r.claim(claimCtx, claimID, &st)
	if err != nil || len(evs) == 0 {
		r.mu.Lock()
		r.stats.add(st)
		r.mu.Unlock()
		return st, err
	}
	st.Claimed = len(evs)
	lastStart := start.Add(r.cfg.ClaimTTL - r.cfg.Timeout - claimMargin)

	// Writes after the claim run without the callers' cancellation, so a
	// stopping relay still records what it did.
	wctx := context.WithoutCancel(workCtx)
	var mu sync.Mutex
	var unsent []int64
	var errs []error
	var g errgroup.Group
	g.SetLimit(r.cfg.Workers)
	for _, ev := range evs {
		g.Go(func() error {
			if claimCtx.Err() != nil || workCtx.Err() != nil || !time.Now().Before(lastStart) {
				mu.Lock()
				unsent = append(unsent, ev.ID)
				mu.Unlock()
				return nil
			}
			d, serr := r.deliverAndRecord(workCtx, wctx, ev, claimID)
			mu.Lock()
			st.add(d)
			if serr != nil {
				errs = append(errs, serr)
			}
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	if len(unsent) > 0 {
		st.Released = len(unsent)
		if _, err := r.dbWrite(wctx, func(ctx context.Context) (bool, error) {
			return true, r.store.releaseEvents(ctx, r.db, claimID, unsent)
		}); err != nil {
			errs = append(errs, err) // the claim runs out by itself
		}
	}
	r.mu.Lock()
	r.stats.add(st)
	r.mu.Unlock()
	if st.Failed > 0 {
		r.log.WarnContext(wctx, "outbox deliveries failed; retries scheduled", "num_failed", st.Failed, "num_delivered", st.Delivered)
	}
	return st, errors.Join(errs...)
}

// deliverAndRecord delivers one claimed event and records the outcome under
// claimID on wctx: delivered (or superseded, when the claim was lost),
// parked for an operator, or failed with its next attempt scheduled. d
// counts the outcome; serr is the record's write error.
func (r *Relay) deliverAndRecord(workCtx, wctx context.Context, ev claimed, claimID int64) (d RelayStats, serr error) {
	derr := r.deliver(workCtx, ev)
	if derr == nil {
		var ok bool
		ok, serr = r.dbWrite(wctx, func(ctx context.Context) (bool, error) {
			return r.store.markDelivered(ctx, r.db, ev.ID, claimID)
		})
		if ok {
			d.Delivered++
		} else if serr == nil {
			d.Superseded++
		}
	} else if reason := r.parkReason(derr, ev.Attempts+1); reason != "" {
		d.Parked++
		r.log.WarnContext(wctx, "outbox event parked: an operator must look", "outbox_id", ev.ID, "order_no", ev.OrderNo,
			"event_type", ev.EventType, "attempt", ev.Attempts+1, "reason", reason, "error", derr.Error())
		_, serr = r.dbWrite(wctx, func(ctx context.Context) (bool, error) {
			return true, r.store.markParked(ctx, r.db, ev.ID, claimID, sqlexec.Truncate(derr.Error(), maxErrorLen), reason)
		})
	} else {
		d.Failed++
		r.log.DebugContext(wctx, "outbox delivery failed", "outbox_id", ev.ID, "order_no", ev.OrderNo,
			"event_type", ev.EventType, "attempt", ev.Attempts+1, "error", derr.Error())
		_, serr = r.dbWrite(wctx, func(ctx context.Context) (bool, error) {
			return true, r.store.markFailed(ctx, r.db, ev.ID, claimID, sqlexec.Truncate(derr.Error(), maxErrorLen), r.cfg.retrySchedule().Delay(ev.Attempts+1))
		})
	}
	return d, serr
}

// maxErrorLen is order_outbox.last_error's width.
const maxErrorLen = 2000

// claimTries is how often a relay pass tries to claim events when its
// claims lose to other relays' (RelayStats.ClaimsLost).
const claimTries = 3

// claim claims due events for claimID. A claim rolled back as contended
// (dbserver.KindContention: 1213, 1205, TiDB's 8022, 8028, 9007) is
// counted in st.ClaimsLost and tried again at once, up to
// claimTries times, then the pass ends with nothing claimed and no error.
// On a Galera cluster that is how two relays on two nodes end when they
// pick the same events (each node's SKIP LOCKED sees only its own locks):
// one claim wins certification; the other's events are no longer due.
func (r *Relay) claim(ctx context.Context, claimID int64, st *RelayStats) ([]claimed, error) {
	for try := 1; ; try++ {
		evs, err := r.store.claimEvents(ctx, r.db, claimID, r.cfg.ClaimTTL, r.cfg.BatchSize)
		if !dbserver.ServerUnknown.Retryable(err) {
			return evs, err
		}
		st.ClaimsLost++
		r.log.DebugContext(ctx, "outbox claim lost to another relay's", "attempt", try, "error", err.Error())
		if try == claimTries || ctx.Err() != nil {
			return nil, nil
		}
	}
}

// dbWrite runs one bookkeeping statement under its own short timeout.
func (r *Relay) dbWrite(ctx context.Context, fn func(ctx context.Context) (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fn(ctx)
}

// retrySchedule is the wait after the n-th failed delivery of an event.
func (c RelayConfig) retrySchedule() backoff.Exponential {
	return backoff.Exponential{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: backoff.EqualJitter}
}

// deliver POSTs one event; nil means acknowledged (2xx).
func (r *Relay) deliver(ctx context.Context, ev claimed) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	endpoint := r.cfg.Endpoints[ev.EventType]
	if endpoint == "" {
		return fmt.Errorf("no endpoint for event type %q", ev.EventType)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(ev.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", IdempotencyKey(ev.OrderNo, ev.EventType))
	req.Header.Set("X-Trace-Id", ev.TraceID)
	req.Header.Set("X-Event-Type", ev.EventType)
	req.Header.Set("X-Outbox-Id", strconv.FormatInt(ev.ID, 10))
	req.Header.Set("X-Delivery-Attempt", strconv.Itoa(ev.Attempts+1))
	if r.cfg.Token != "" {
		req.Header.Set(r.cfg.TokenHeader, r.cfg.Token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", redact.URL(endpoint), redact.Err(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode/100 != 2 {
		return &deliveryError{Status: resp.StatusCode,
			Err: fmt.Errorf("POST %s: status %d: %s", redact.URL(endpoint), resp.StatusCode, sqlexec.Truncate(strings.TrimSpace(string(body)), 200))}
	}
	return nil
}

// purgeEvery is how often a relay deletes old delivered events.
const purgeEvery = 10 * time.Minute

// purge deletes delivered events older than the retention, at most every
// purgeEvery, in chunks, until none is left or ctx ends.
func (r *Relay) purge(ctx context.Context) {
	if r.cfg.Retention < 0 || time.Since(r.lastPurge) < purgeEvery || ctx.Err() != nil {
		return
	}
	r.lastPurge = time.Now()
	total := int64(0)
	for ctx.Err() == nil {
		n, err := r.store.purgeDelivered(ctx, r.db, r.cfg.Retention, 1000)
		if err != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "purge delivered outbox events", "error", err.Error())
			}
			return
		}
		total += n
		if n < 1000 {
			break
		}
	}
	if total > 0 {
		r.log.InfoContext(ctx, "purged delivered outbox events", "num_deleted", total, "retention", r.cfg.Retention.String())
	}
}
