package delay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/redact"
)

// Counters are the dispatcher's running totals since it was built.
type Counters struct {
	Claimed   int64            // claims taken (timer and sweep)
	Done      int64            // attempts that succeeded and were recorded DONE
	Retried   int64            // failed attempts rescheduled with backoff
	NotNow    int64            // attempts that said "not now", rescheduled without spending a retry
	NotDue    int64            // attempts that came too early, moved to the due time
	Failed    int64            // tasks moved to FAILED
	Released  int64            // claims given back by shutdown
	Lost      int64            // results discarded: the claim had been recovered
	Recovered int64            // stuck claims recovered (to PENDING or FAILED)
	Outcomes  map[string]int64 // successful attempts by ReportOutcome name ("" if none)
}

type counters struct {
	claimed, done, retried, notNow, notDue, failed, released, lost, recovered atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int64
}

// Counters returns a snapshot of the totals.
func (d *Dispatcher) Counters() Counters {
	c := &d.counters
	out := Counters{
		Claimed: c.claimed.Load(), Done: c.done.Load(), Retried: c.retried.Load(),
		NotNow: c.notNow.Load(), NotDue: c.notDue.Load(),
		Failed: c.failed.Load(), Released: c.released.Load(), Lost: c.lost.Load(),
		Recovered: c.recovered.Load(), Outcomes: map[string]int64{},
	}
	c.mu.Lock()
	for k, v := range c.outcomes {
		out.Outcomes[k] = v
	}
	c.mu.Unlock()
	return out
}

// result is what one attempt came to.
type result int

const (
	resultDone result = iota
	resultRetry
	resultFailed
	resultReleased
	resultLost // the write found the claim gone, or could not be made
	resultNotNow
	resultNotDue
)

// run performs one claimed attempt and records its result. ctx is the
// worker's (or the sweep's) context: when it is cancelled during the
// attempt, the claim is given back instead of spending a retry.
func (d *Dispatcher) run(ctx context.Context, t *Task) result {
	tc := d.newTaskCtx(t)
	hctx, cancel := context.WithTimeout(withTask(ctx, tc), d.cfg.HandlerTimeout)
	start := time.Now()
	err := d.call(hctx, t)
	if err != nil && hctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		err = fmt.Errorf("handler timed out after %s: %w", d.cfg.HandlerTimeout, err)
	}
	cancel()
	return d.settle(ctx, t, tc, start, err)
}

// newTaskCtx is what a handler's context carries for t: its trace id and a
// logger tagged with it.
func (d *Dispatcher) newTaskCtx(t *Task) *taskCtx {
	log := d.log.With("trace_id", t.TraceID, "biz_uuid", t.BizUUID, "task_id", t.ID,
		"handler", t.Handler, "attempt", t.RetryCount+1)
	return &taskCtx{traceID: t.TraceID, log: log}
}

// settle records the result of t's attempt, which started at start and
// ended with err (nil: success), and reports it to the Observer. ctx is the
// worker's (or the sweep's): when it is cancelled, a failed attempt's claim
// is given back instead of spending a retry.
func (d *Dispatcher) settle(ctx context.Context, t *Task, tc *taskCtx, start time.Time, err error) (res result) {
	defer d.observe(t, start, &res)
	log := tc.log
	elapsed := time.Since(start)

	// Results are written even when ctx is cancelled: losing the write
	// would leave the task RUNNING until recovered.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer fcancel()
	switch {
	case err == nil:
		if !d.finish(fctx, log, t, "done", func() (bool, error) { return d.store.done(fctx, d.db, t) }) {
			return resultLost
		}
		d.countDone(ctx, t, tc, start, elapsed)
		return resultDone

	case ctx.Err() != nil:
		why := fmt.Sprintf("released: %v (attempt cut short: %v)", context.Cause(ctx), err)
		if !d.finish(fctx, log, t, "release", func() (bool, error) {
			return d.store.reschedule(fctx, d.db, t, time.Time{}, t.ExecuteTime, why)
		}) {
			return resultLost
		}
		d.counters.released.Add(1)
		d.reschedule(fctx, log, timerEntry{ID: t.ID, Time: d.clock.Now(), Attempt: t.RetryCount + 1})
		log.InfoContext(ctx, "delayed task released by shutdown", "err", err)
		return resultReleased
	}
	if res, ok := d.settleLater(ctx, fctx, log, t, err); ok {
		return res
	}

	msg := err.Error()
	if nn := (*NotNowError)(nil); errors.As(err, &nn) {
		msg = fmt.Sprintf("could not run for %s after its execute time (notNowMaxAge), counted as a failure: %v",
			d.cfg.NotNowMaxAge, err)
	}
	var perm *PermanentError
	if errors.As(err, &perm) || !retryAllowed(t.RetryCount+1, t.MaxRetry) {
		if !d.finish(fctx, log, t, "fail", func() (bool, error) { return d.store.failed(fctx, d.db, t, msg) }) {
			return resultLost
		}
		d.counters.failed.Add(1)
		log.ErrorContext(ctx, "delayed task failed for good", "retry_count", t.RetryCount+1,
			"max_retry", t.MaxRetry, "err", err)
		return resultFailed
	}
	wait := d.cfg.retrySchedule().Delay(t.RetryCount + 1)
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After >= 0 {
		wait = ra.After
	}
	next := d.clock.Now().Add(wait)
	if !d.finish(fctx, log, t, "retry", func() (bool, error) { return d.store.retry(fctx, d.db, t, next, msg) }) {
		return resultLost
	}
	d.counters.retried.Add(1)
	d.reschedule(fctx, log, timerEntry{ID: t.ID, Time: next, Attempt: t.RetryCount + 2})
	log.WarnContext(ctx, "delayed task attempt failed; will retry", "retry_count", t.RetryCount+1,
		"max_retry", t.MaxRetry, "next_attempt_time", next, "err", err)
	return resultRetry
}

// settleLater handles the attempts that said "not now" (NotNow) or "not
// yet" (NotDue): their task goes back to PENDING without spending a retry,
// after the not-now backoff or at the due time given. ok is false for other
// errors, and for "not now" past NotNowMaxAge after the task's execute time,
// which is then a failure like any other.
func (d *Dispatcher) settleLater(ctx, fctx context.Context, log *slog.Logger, t *Task, err error) (res result, ok bool) {
	now := d.clock.Now()
	var nd *NotDueError
	var nn *NotNowError
	var next, execute time.Time
	switch {
	case errors.As(err, &nd):
		next = now.Add(max(nd.In, time.Millisecond))
		execute, res = next, resultNotDue
	case errors.As(err, &nn) && now.Sub(t.ExecuteTime) < d.cfg.NotNowMaxAge:
		next = now.Add(d.notNowWait(now.Sub(t.ExecuteTime)))
		execute, res = t.ExecuteTime, resultNotNow
	default:
		return 0, false
	}
	msg := err.Error()
	if !d.finish(fctx, log, t, "reschedule", func() (bool, error) {
		return d.store.reschedule(fctx, d.db, t, next, execute, msg)
	}) {
		return resultLost, true
	}
	d.reschedule(fctx, log, timerEntry{ID: t.ID, Time: next, Attempt: t.RetryCount + 1})
	if res == resultNotDue {
		d.counters.notDue.Add(1)
		log.InfoContext(ctx, "delayed task came before its due time; moved to it", "next_attempt_time", next, "err", err)
	} else {
		d.counters.notNow.Add(1)
		log.DebugContext(ctx, "delayed task cannot run now; rescheduled without spending a retry",
			"next_attempt_time", next, "err", err)
	}
	return res, true
}

// notNowWait is the wait after a "not now" of a task whose execute time was
// age ago: the not-now schedule's step for the n-th "not now", n counted
// from age (NotNowBackoff, then doubling for every further NotNowBackoff ×
// 2^k that age spans, so successive waits double; at most
// NotNowBackoffMax), with equal jitter, so tasks turned away together come
// back spread out. Counting from age needs no stored count.
func (d *Dispatcher) notNowWait(age time.Duration) time.Duration {
	s := d.cfg.notNowSchedule()
	n := 1
	for s.Step(n) < d.cfg.NotNowBackoffMax && 2*s.Step(n) <= age {
		n++
	}
	return s.Delay(n)
}

// notNowSchedule is the wait after a "not now" (see notNowWait).
func (c Config) notNowSchedule() backoff.Exponential {
	return backoff.Exponential{Base: c.NotNowBackoff, Max: c.NotNowBackoffMax, Jitter: backoff.EqualJitter}
}

// countDone counts and logs an attempt of t recorded DONE.
func (d *Dispatcher) countDone(ctx context.Context, t *Task, tc *taskCtx, start time.Time, elapsed time.Duration) {
	outcome := tc.getOutcome()
	d.counters.done.Add(1)
	d.counters.mu.Lock()
	d.counters.outcomes[outcome]++
	d.counters.mu.Unlock()
	tc.log.DebugContext(ctx, "delayed task done", "outcome", outcome, "duration_ms", elapsed.Milliseconds(),
		"lateness_ms", start.Sub(t.NextAttemptTime).Milliseconds())
}

// resultWriteWait spaces the three tries of a result write: 100 ms, then
// 200 ms, well inside the write's own timeout.
var resultWriteWait = backoff.Exponential{Base: 100 * time.Millisecond}

// finish makes a result write, retrying a failed write twice. false means
// the result was not recorded: the claim was lost (the task was recovered,
// someone else owns it now) or the database did not take the write (the
// task stays RUNNING until recovered).
func (d *Dispatcher) finish(ctx context.Context, log *slog.Logger, t *Task, what string, write func() (bool, error)) bool {
	var ok bool
	err := backoff.Retry(ctx, resultWriteWait, 3, func(context.Context, int) (bool, error) {
		var err error
		ok, err = write()
		return true, err
	})
	if err == nil {
		if !ok {
			d.counters.lost.Add(1)
			log.WarnContext(ctx, "delayed task result discarded: the claim was recovered and belongs to another run", "result", what)
		}
		return ok
	}
	d.counters.lost.Add(1)
	log.ErrorContext(ctx, "record delayed task result; it stays RUNNING until recovered", "result", what, "err", err)
	return false
}

func (d *Dispatcher) reschedule(ctx context.Context, log *slog.Logger, e timerEntry) {
	if err := d.timer.add(ctx, e); err != nil {
		log.WarnContext(ctx, "timer not told of a rescheduled task; the reconciler will", "err", err)
	}
}

// retrySchedule is the wait after the n-th failed attempt of a task:
// min(base × 2^(n-1), max), of which the second half is random ("equal
// jitter"), so retries of tasks that failed together spread out but never
// come sooner than half the step.
func (c Config) retrySchedule() backoff.Exponential {
	return backoff.Exponential{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: backoff.EqualJitter}
}

// call runs the task's handler, turning a panic into an error.
func (d *Dispatcher) call(ctx context.Context, t *Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler %s panicked: %v\n%s", t.Handler, r, debug.Stack())
		}
	}()
	if h, ok := d.handlers[t.Handler]; ok {
		return h(ctx, t)
	}
	if h, ok := d.batch[t.Handler]; ok {
		return d.callBatch(ctx, t.Handler, h, []*Task{t})[0]
	}
	if svc, path, ok := ParseHTTPHandler(t.Handler); ok {
		return d.callHTTP(ctx, t, svc, path)
	}
	// Possibly registered through an executor that has it: retrying lets
	// the task reach one (or FAIL with this message).
	return fmt.Errorf("no handler %q in this executor", t.Handler)
}

// callHTTP POSTs the payload to a configured service. 2xx is success.
func (d *Dispatcher) callHTTP(ctx context.Context, t *Task, svc, path string) error {
	base, ok := d.cfg.Services[svc]
	if !ok {
		return fmt.Errorf("service %q is not configured in this executor", svc)
	}
	url := base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(t.Payload))
	if err != nil {
		return Permanent(fmt.Errorf("build request to %s: %w", url, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Trace-Id", t.TraceID)
	req.Header.Set("X-Biz-Uuid", t.BizUUID)
	req.Header.Set("X-Delay-Attempt", strconv.Itoa(t.RetryCount+1))
	req.Header.Set("X-Delay-Execute-Time", t.ExecuteTime.Format(time.RFC3339Nano))
	if d.cfg.ServiceToken != "" {
		req.Header.Set("Authorization", "Bearer "+d.cfg.ServiceToken)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", redact.URL(url), redact.Err(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: status %d: %s", redact.URL(url), resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}
