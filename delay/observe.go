package delay

import "time"

// Observer receives the result of each attempt, for metrics. The dispatcher
// calls it on the worker's goroutine once the result is recorded, so it must
// be cheap and must not block.
type Observer interface {
	// TaskAttempted reports one attempt of a task run by handler (the
	// task's handler name, which for HTTP targets includes the path):
	// result is one of the Attempt* names; lateness is how long after the
	// task's due time (its next_attempt_time, on the database clock) the
	// attempt started; duration is how long the attempt took, the result
	// write included.
	TaskAttempted(handler, result string, lateness, duration time.Duration)
}

// Results of an attempt, as given to Observer.TaskAttempted.
const (
	AttemptDone     = "done"     // succeeded; the task is DONE
	AttemptRetry    = "retry"    // failed; rescheduled with backoff
	AttemptFailed   = "failed"   // failed for good; the task is FAILED
	AttemptReleased = "released" // cut short by shutdown; given back
	AttemptLost     = "lost"     // the result could not be recorded
	AttemptNotNow   = "not_now"  // could not run now; rescheduled, no retry spent
	AttemptNotDue   = "not_due"  // came before its due time; moved to it
)

var resultNames = [...]string{
	resultDone:     AttemptDone,
	resultRetry:    AttemptRetry,
	resultFailed:   AttemptFailed,
	resultReleased: AttemptReleased,
	resultLost:     AttemptLost,
	resultNotNow:   AttemptNotNow,
	resultNotDue:   AttemptNotDue,
}

// observe reports an attempt that started at start (local clock) and ended
// with *res; it is deferred by run.
func (d *Dispatcher) observe(t *Task, start time.Time, res *result) {
	if d.cfg.Observer == nil {
		return
	}
	took := time.Since(start)
	// The database-clock time the attempt started: the estimate now, less
	// the time since (both on the local monotonic clock).
	late := d.clock.Now().Add(-took).Sub(t.NextAttemptTime)
	d.cfg.Observer.TaskAttempted(t.Handler, resultNames[*res], late, took)
}
