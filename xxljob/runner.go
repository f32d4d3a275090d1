package xxljob

import (
	"context"
	"sync"
	"time"
)

// runner keeps one goroutine ("job thread") per jobId with a FIFO queue of
// triggers, applies the block strategies and kills. Different jobIds run in
// parallel. All state is guarded by mu; nothing under mu blocks.
type runner struct {
	// execFunc runs a trigger and reports its result itself; reportFunc
	// reports the results of triggers killed before they ran.
	execFunc    func(ctx context.Context, t *jobThread, p triggerParam)
	reportFunc  func([]callbackParam)
	idleTimeout time.Duration // a job thread idle this long exits (Java ~90 s)

	mu       sync.Mutex
	base     context.Context // parent of every run's context; set by start
	handlers map[string]Handler
	threads  map[int32]*jobThread
	refuse   string          // non-empty: /run answers this failure
	active   map[int64]int64 // logIds queued or running: their logDateTime
	recent   recentIDs       // logIds that finished lately
	live     tracker         // job thread goroutines
}

// jobThread is the state of one job's goroutine.
type jobThread struct {
	jobID   int32
	name    string
	handler Handler
	wake    chan struct{} // cap 1

	dialect dialect // of the latest trigger; guarded by runner.mu

	// guarded by runner.mu
	queue      []triggerParam
	running    bool
	cancelRun  context.CancelCauseFunc
	stopReason string // non-empty once stopped
}

func (t *jobThread) busy() bool { return t.running || len(t.queue) > 0 }

func (t *jobThread) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// stopError is the cancellation cause of a run whose job thread was stopped.
type stopError struct{ reason string }

func (e *stopError) Error() string { return "job thread stopped: " + e.reason }

const recentLogIDs = 4096

func newRunner() *runner {
	return &runner{
		handlers:    make(map[string]Handler),
		threads:     make(map[int32]*jobThread),
		active:      make(map[int64]int64),
		refuse:      msgRefuseNotStarted,
		idleTimeout: 90 * time.Second,
		recent:      recentIDs{set: make(map[int64]struct{})},
	}
}

func (r *runner) handler(name string) (Handler, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.handlers[name]
	return h, ok
}

// start opens the runner for triggers; runs derive from base.
func (r *runner) start(base context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base, r.refuse = base, ""
}

// trigger handles /run. It only enqueues and never waits for a handler.
func (r *runner) trigger(p triggerParam, d dialect) returnT {
	r.mu.Lock()
	var killed []callbackParam
	defer func() {
		r.mu.Unlock()
		r.report(killed)
	}()
	if r.refuse != "" {
		return failure(r.refuse)
	}
	if msg, refused := d.refuseGlue(p.GlueType); refused {
		return failure(msg) // no code sent over the wire ever runs here
	}
	h, ok := r.handlers[p.ExecutorHandler]
	if !ok {
		return failure(msgHandlerNotFound(p.ExecutorHandler))
	}
	if _, dup := r.active[p.LogID]; dup || r.recent.has(p.LogID) {
		return failure(d.repeatTrigger(p.LogID))
	}
	t := r.threads[p.JobID]
	if t != nil && t.name != p.ExecutorHandler {
		killed = append(killed, r.stopLocked(t, reasonChangeHandler)...)
		t = nil
	}
	if t != nil && t.busy() {
		switch p.ExecutorBlockStrategy {
		case blockDiscardLater:
			return failure(msgDiscardLater)
		case blockCoverEarly:
			killed = append(killed, r.stopLocked(t, reasonCoverEarly)...)
			t = nil
		}
	}
	if t == nil {
		t = &jobThread{jobID: p.JobID, name: p.ExecutorHandler, handler: h, wake: make(chan struct{}, 1)}
		r.threads[p.JobID] = t
		r.live.goFunc(func() { r.loop(t) })
	}
	t.queue = append(t.queue, p)
	t.dialect = d
	r.active[p.LogID] = p.LogDateTime
	t.signal()
	return success()
}

// report hands results to the callback sender, never under r.mu: the
// sender writes them to disk before anything else.
func (r *runner) report(ps []callbackParam) {
	if len(ps) > 0 {
		r.reportFunc(ps)
	}
}

// loop is a job thread: it runs the queue in order until stopped, idle for
// idleTimeout, or drained during shutdown.
func (r *runner) loop(t *jobThread) {
	idle := time.NewTimer(r.idleTimeout)
	defer idle.Stop()
	for {
		r.mu.Lock()
		if t.stopReason != "" {
			r.mu.Unlock()
			return
		}
		if len(t.queue) == 0 {
			if r.refuse != "" { // shutting down and nothing left to do
				r.removeLocked(t, reasonShutdown)
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			idle.Reset(r.idleTimeout)
			select {
			case <-t.wake:
			case <-idle.C:
				r.mu.Lock()
				if len(t.queue) == 0 && t.stopReason == "" {
					r.removeLocked(t, t.dialect.idleReason())
				}
				r.mu.Unlock()
			}
			continue
		}
		p := t.queue[0]
		t.queue[0] = triggerParam{}
		t.queue = t.queue[1:]
		ctx, cancel := context.WithCancelCause(r.base)
		t.running, t.cancelRun = true, cancel
		r.mu.Unlock()

		r.execFunc(ctx, t, p)
		cancel(nil)

		r.mu.Lock()
		t.running, t.cancelRun = false, nil
		r.finishLocked(p.LogID)
		r.mu.Unlock()
	}
}

// stopLocked stops a job thread: the results of its queued triggers are
// returned for the caller to report once r.mu is released; the running one
// is cancelled and reports when execFunc returns.
func (r *runner) stopLocked(t *jobThread, reason string) []callbackParam {
	if t.stopReason != "" {
		return nil
	}
	r.removeLocked(t, reason)
	killed := r.dropQueueLocked(t, reason)
	if t.cancelRun != nil {
		t.cancelRun(&stopError{reason: reason})
	}
	t.signal()
	return killed
}

// dropQueueLocked empties t's queue and returns a killed result for each
// trigger in it.
func (r *runner) dropQueueLocked(t *jobThread, reason string) []callbackParam {
	var killed []callbackParam
	for _, q := range t.queue {
		r.finishLocked(q.LogID)
		killed = append(killed, callbackParam{LogID: q.LogID, LogDateTim: q.LogDateTime, HandleCode: CodeFail, HandleMsg: reason + suffixQueuedKilled})
	}
	t.queue = nil
	return killed
}

func (r *runner) removeLocked(t *jobThread, reason string) {
	t.stopReason = reason
	if r.threads[t.jobID] == t {
		delete(r.threads, t.jobID)
	}
}

func (r *runner) finishLocked(logID int64) {
	delete(r.active, logID)
	r.recent.add(logID)
}

// kill handles /kill; false means no thread existed for the job.
func (r *runner) kill(jobID int32) bool {
	r.mu.Lock()
	t := r.threads[jobID]
	if t == nil {
		r.mu.Unlock()
		return false
	}
	killed := r.stopLocked(t, reasonKill)
	r.mu.Unlock()
	r.report(killed)
	return true
}

// accepted reports whether the trigger of logID is queued or running here
// with its log in the date folder of logDateTime: a /log naming another day
// is about another run's file (or none), even with the same logId. The day
// is compared, not the time: the admin's /log sends the trigger time it
// stored, to the second (a DATETIME column), while /run sent milliseconds.
func (r *runner) accepted(logID, logDateTime int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.active[logID]
	return ok && logDay(at) == logDay(logDateTime)
}

// busy handles /idleBeat.
func (r *runner) busy(jobID int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.threads[jobID]
	return t != nil && t.busy()
}

// close refuses new triggers and kills every queued one at once, as the
// Java executor does at shutdown (the admin has been told to route
// elsewhere: a run started now would begin after the executor deregistered).
// Running triggers go on; their job threads exit when they finish.
func (r *runner) close() (queued int) {
	r.mu.Lock()
	r.refuse = msgRefuseShutdown
	var killed []callbackParam
	for _, t := range r.threads {
		killed = append(killed, r.dropQueueLocked(t, reasonShutdown)...)
		t.signal()
	}
	r.mu.Unlock()
	r.report(killed)
	return len(killed)
}

// stopAll stops every job thread with reason (shutdown timeout reached).
func (r *runner) stopAll(reason string) int {
	r.mu.Lock()
	n := len(r.threads)
	var killed []callbackParam
	for _, t := range r.threads {
		killed = append(killed, r.stopLocked(t, reason)...)
	}
	r.mu.Unlock()
	r.report(killed)
	return n
}

func (r *runner) threadCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.threads)
}

// recentIDs is a bounded set of the last finished logIds, so a trigger
// repeated shortly after its run still counts as a repeat.
type recentIDs struct {
	ring []int64
	next int
	set  map[int64]struct{}
}

func (s *recentIDs) has(id int64) bool { _, ok := s.set[id]; return ok }

func (s *recentIDs) add(id int64) {
	if s.has(id) {
		return
	}
	if len(s.ring) < recentLogIDs {
		s.ring = append(s.ring, id)
	} else {
		delete(s.set, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % recentLogIDs
	}
	s.set[id] = struct{}{}
}

// tracker counts goroutines it started and waits for them with a deadline,
// which a sync.WaitGroup cannot do without leaking a waiter.
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (t *tracker) goFunc(f func()) {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.done()
		f()
	}()
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// wait returns nil once no goroutine is left, or ctx's error.
func (t *tracker) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	z := t.zero
	t.mu.Unlock()
	select {
	case <-z:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
