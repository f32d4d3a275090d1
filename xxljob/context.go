package xxljob

import "context"

// RunRef names one run: what the process log and metrics need to tie a line
// or a sample to the trigger the admin shows.
type RunRef struct {
	JobID   int    // the admin's job id (0 for RunOnce)
	LogID   int64  // the admin's job log id
	Handler string // the handler name
}

type runKey struct{}

// withRun returns the context a handler receives: ctx carrying req's
// identity, so code below the handler (which knows nothing of XXL-JOB) logs
// lines that a log handler can tag with job_id and log_id.
func withRun(ctx context.Context, req *Request) context.Context {
	return context.WithValue(ctx, runKey{}, RunRef{JobID: req.JobID, LogID: req.LogID, Handler: req.Handler})
}

// RunFromContext returns the run whose handler received ctx (or a context
// derived from it), and false for any other context. A slog.Handler can use
// it to add job_id and log_id to every process-log line written with a run's
// context.
func RunFromContext(ctx context.Context) (RunRef, bool) {
	r, ok := ctx.Value(runKey{}).(RunRef)
	return r, ok
}

// CallbackQueueLen returns the number of run results waiting in memory to be
// sent to the admin (not counting the disk spool), for metrics.
func (e *Executor) CallbackQueueLen() int {
	e.callback.mu.Lock()
	defer e.callback.mu.Unlock()
	return len(e.callback.queue)
}
