package delay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// HandlerFunc runs one attempt of a task. Its context carries the task's
// trace id (TraceID), a logger tagged with it (Logger) and a deadline (the
// dispatcher's HandlerTimeout). Returning nil marks the task DONE; an error
// schedules a retry with backoff, or FAILED once retries are spent (at once
// for a Permanent error). Handlers must be idempotent: a task whose
// dispatcher died mid-attempt runs again after the RUNNING limit.
type HandlerFunc func(ctx context.Context, t *Task) error

type ctxKey struct{}

// taskCtx is what the dispatcher puts in a handler's context.
type taskCtx struct {
	traceID string
	log     *slog.Logger
	mu      sync.Mutex
	outcome string
}

func withTask(ctx context.Context, tc *taskCtx) context.Context {
	return context.WithValue(ctx, ctxKey{}, tc)
}

func fromCtx(ctx context.Context) *taskCtx {
	tc, _ := ctx.Value(ctxKey{}).(*taskCtx)
	return tc
}

// TraceID returns the trace id of the task whose handler ctx belongs to, or
// "" outside a handler. In a BatchHandlerFunc's context it is the batch's
// own trace id (logged with the tasks' at debug level); ForTask(ctx, t)
// carries task t's.
func TraceID(ctx context.Context) string {
	if tc := fromCtx(ctx); tc != nil {
		return tc.traceID
	}
	return ""
}

// Logger returns the dispatcher's logger tagged with the task's trace_id,
// biz_uuid, task_id and handler, or a logger that discards outside a
// handler. In a BatchHandlerFunc's context it is tagged with the batch's
// trace_id, handler and batch_size; ForTask(ctx, t) gives task t's.
func Logger(ctx context.Context) *slog.Logger {
	if tc := fromCtx(ctx); tc != nil && tc.log != nil {
		return tc.log
	}
	return slog.New(slog.DiscardHandler)
}

// ReportOutcome names what a successful attempt did (e.g. "closed",
// "skipped_paid"); the dispatcher counts outcomes (Dispatcher.Counters) and
// logs them with the task. Outside a handler it does nothing; in a batch
// handler, call it with ForTask(ctx, t).
func ReportOutcome(ctx context.Context, outcome string) {
	if tc := fromCtx(ctx); tc != nil {
		tc.mu.Lock()
		tc.outcome = outcome
		tc.mu.Unlock()
	}
}

func (tc *taskCtx) getOutcome() string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.outcome
}

// PermanentError is a failure that retrying cannot fix (a payload that does
// not parse): the task goes to FAILED at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// RetryAfterError asks for the next attempt after a given time instead of
// the backoff (the attempt still counts as a retry).
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %s)", e.Err, e.After)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter fails the attempt and asks for the next one after d.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &RetryAfterError{Err: err, After: d}
}

// NotNowError says an attempt could not be made now for a reason outside the
// task (the order's lock held elsewhere, Redis or the database unreachable,
// the payment side not answering). The task goes back to PENDING without
// spending a retry, after Config.NotNowBackoff (doubling with the time since
// its execute time, up to NotNowBackoffMax), for as long as NotNowMaxAge
// after its execute time; past that, the attempt counts as a failure with
// this error.
type NotNowError struct{ Err error }

func (e *NotNowError) Error() string { return "not now: " + e.Err.Error() }
func (e *NotNowError) Unwrap() error { return e.Err }

// NotNow marks err as "not now": try again later without spending a retry.
func NotNow(err error) error {
	if err == nil {
		return nil
	}
	return &NotNowError{Err: err}
}

// NotDueError says the task came too early: what it acts on is due In from
// now (an order whose timeout is later than the task's execute time). The
// task's execute time and next attempt move to then, without spending a
// retry.
type NotDueError struct {
	Err error
	In  time.Duration
}

func (e *NotDueError) Error() string {
	return fmt.Sprintf("not due for %s: %v", e.In.Round(time.Millisecond), e.Err)
}
func (e *NotDueError) Unwrap() error { return e.Err }

// NotDue reschedules the task to run in d (at least a millisecond) without
// spending a retry; err says why.
func NotDue(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("not due yet")
	}
	return &NotDueError{Err: err, In: d}
}
