package xxljob

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Handler runs one trigger of a job. The context is cancelled when the admin
// kills the job, when the job's executorTimeout expires, when a COVER_EARLY
// trigger replaces the run, or when the executor shuts down; a handler should
// return soon after. Returning nil reports success (CodeSuccess), an error
// reports CodeFail with err.Error() as the message (CodeTimeout if it wraps
// ErrTimeout; a context.DeadlineExceeded of the handler's own, from a query
// or an HTTP call, is a failure). A panic is recovered and reported as CodeFail
// with its stack. Triggers of different jobs bound to the same handler run in
// parallel, so Handle must be safe for concurrent use.
type Handler interface {
	Handle(ctx context.Context, req *Request) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) error

// Handle calls f(ctx, req).
func (f HandlerFunc) Handle(ctx context.Context, req *Request) error { return f(ctx, req) }

// Request describes one trigger. Each run gets its own Request; nothing in it
// is shared with other runs, including concurrent runs of the same handler.
type Request struct {
	JobID       int       // the admin's job id (0 for RunOnce)
	LogID       int64     // the admin's job log id, unique per trigger
	LogDateTime time.Time // trigger time sent by the admin (millisecond precision)
	Param       string    // executorParams, "" if absent
	ShardIndex  int       // broadcastIndex, 0 unless SHARDING_BROADCAST
	ShardTotal  int       // broadcastTotal, at least 1
	Handler     string    // handler name the trigger asked for

	// Log writes human-readable lines into this run's log file, the log the
	// admin UI shows for this trigger. It is not the process log.
	Log *slog.Logger

	run *runState // shared by copies of this Request
}

// runState is the mutable part of a run; Request points to it so that a
// Request may be copied.
type runState struct {
	rl     *runLog
	mu     sync.Mutex
	result string
}

// Logf writes one formatted line into this run's log.
func (r *Request) Logf(format string, args ...any) {
	if r.run == nil { // a Request built by hand, e.g. in a unit test
		if r.Log != nil {
			r.Log.Info(fmt.Sprintf(format, args...))
		}
		return
	}
	r.run.rl.entry(time.Now(), slog.LevelInfo, fmt.Sprintf(format, args...))
}

// SetResult sets the message reported to the admin (handleMsg) when the run
// succeeds; the admin shows it in its job log list. A failed run reports its
// error instead.
func (r *Request) SetResult(msg string) {
	if r.run == nil {
		r.run = &runState{}
	}
	r.run.mu.Lock()
	r.run.result = msg
	r.run.mu.Unlock()
}

func (r *Request) resultMsg() string {
	r.run.mu.Lock()
	defer r.run.mu.Unlock()
	return r.run.result
}

// Result is the outcome of a run as reported to the admin.
type Result struct {
	Code int    // CodeSuccess, CodeFail or CodeTimeout
	Msg  string // handleMsg; may be empty on success
}

// Observer receives events for metrics. The executor calls its methods
// synchronously from its own goroutines: they must be cheap and never block.
type Observer interface {
	// RunStarted is called when a trigger is taken from its job's queue.
	RunStarted(handler string, jobID int, logID int64)
	// RunFinished is called when a started run has its result.
	RunFinished(handler string, jobID int, logID int64, code int, d time.Duration)
	// CallbackSent is called after each attempt to deliver a batch of results.
	CallbackSent(items int, err error)
	// CallbackSpool is called with the number of results waiting in the
	// disk spool for delivery (not counting those also queued in memory)
	// when it changed, or was first read.
	CallbackSpool(results int)
	// Registered is called after each registry round.
	Registered(err error)
}

// AuthObserver is an Observer that also hears of refused requests: an
// Observer implementing it is called once for every request to the
// executor refused for a wrong or missing access token (or, in the main
// dialect, a wrong group), with the caller's address.
type AuthObserver interface {
	AuthFailed(remote string)
}

type nopObserver struct{}

func (nopObserver) RunStarted(string, int, int64)                      {}
func (nopObserver) RunFinished(string, int, int64, int, time.Duration) {}
func (nopObserver) CallbackSent(int, error)                            {}
func (nopObserver) CallbackSpool(int)                                  {}
func (nopObserver) Registered(error)                                   {}
