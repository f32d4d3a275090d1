package delay

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"
)

// BatchHandlerFunc runs one attempt of each of several tasks of the same
// handler in one call, for handlers whose work is much cheaper done for many
// tasks together (handlers.DelayOrderCloseBatch: one lock pipeline and one
// transaction for all the orders). It returns one error per task, in the
// order of tasks, each with the meaning a HandlerFunc's has: nil marks that
// task DONE, an error schedules its retry with backoff or FAILS it (at once
// for a Permanent error), a RetryAfter error sets its next attempt. Each
// task's result is recorded on its own.
//
// ctx carries the dispatcher's HandlerTimeout (for the whole call) and the
// batch's own trace id and logger (TraceID, Logger); ForTask(ctx, t) is the
// context of one task, with that task's trace id and logger, where
// ReportOutcome names what its attempt did. Like handlers, batch handlers
// must be idempotent per task. A panic, or a result slice of the wrong
// length, fails the attempt of every task of the call.
type BatchHandlerFunc func(ctx context.Context, tasks []*Task) []error

// batchKey keys the per-task contexts of a batch call.
type batchKey struct{}

// batchCtx is what the dispatcher puts in a batch handler's context: each
// task's taskCtx by task id.
type batchCtx struct {
	tasks map[int64]*taskCtx
}

// ForTask returns the context for task t of a batch handler call made with
// ctx: ctx with t's trace id (TraceID), its tagged logger (Logger), and
// where ReportOutcome records t's outcome. For a single handler's context
// (or a task not in the batch) it returns ctx as it is.
func ForTask(ctx context.Context, t *Task) context.Context {
	if t == nil {
		return ctx
	}
	if bc, ok := ctx.Value(batchKey{}).(*batchCtx); ok {
		if tc := bc.tasks[t.ID]; tc != nil {
			return withTask(ctx, tc)
		}
	}
	return ctx
}

// workItem is what a worker runs: one task of a single handler, or up to
// HandlerBatchSize tasks of one batch handler.
type workItem struct {
	task  *Task
	batch []*Task
}

// group turns claimed tasks into work items: the tasks of each batch
// handler in chunks of HandlerBatchSize (in claim order), every other task
// on its own.
func (d *Dispatcher) group(tasks []*Task) []workItem {
	var items []workItem
	byName := map[string][]*Task{}
	var names []string
	for _, t := range tasks {
		if _, ok := d.batch[t.Handler]; !ok {
			items = append(items, workItem{task: t})
			continue
		}
		if _, seen := byName[t.Handler]; !seen {
			names = append(names, t.Handler)
		}
		byName[t.Handler] = append(byName[t.Handler], t)
	}
	for _, name := range names {
		ts := byName[name]
		for len(ts) > 0 {
			n := min(len(ts), d.cfg.HandlerBatchSize)
			items = append(items, workItem{batch: ts[:n:n]})
			ts = ts[n:]
		}
	}
	return items
}

// groupsAtMost bounds the batch items that n tasks of batch handlers make:
// at most one per HandlerBatchSize tasks, plus one per further handler name
// whose chunk is not full.
func (d *Dispatcher) groupsAtMost(n int) int {
	if n <= 0 {
		return 0
	}
	return min(n, (n+d.cfg.HandlerBatchSize-1)/d.cfg.HandlerBatchSize+len(d.batch)-1)
}

// popLimit is how many ids the poller may pop holding held worker slots.
// Without batch handlers, one per slot. With them, a slot may run a whole
// batch: up to (held - K + 1) × HandlerBatchSize ids (K batch handler
// names), which groupsAtMost keeps within held items; the claim then takes
// only as many single-handler tasks as slots are left (claimSplit).
func (d *Dispatcher) popLimit(held int) int {
	k := len(d.batch)
	if k == 0 || held < k {
		return held
	}
	return min(d.cfg.BatchSize, (held-k+1)*d.cfg.HandlerBatchSize)
}

// execute runs one work item, records its tasks' results and then tells
// the timer it is done with them (RabbitMQ acknowledges their messages only
// now, so a crash before the results are stored redelivers them).
func (d *Dispatcher) execute(ctx context.Context, it workItem) []result {
	if it.batch == nil {
		res := d.run(ctx, it.task)
		d.timer.done([]int64{it.task.ID}, false)
		return []result{res}
	}
	res := d.runBatch(ctx, it.batch)
	ids := make([]int64, len(it.batch))
	for i, t := range it.batch {
		ids[i] = t.ID
	}
	d.timer.done(ids, false)
	return res
}

// runBatch performs one attempt of each task (all of one batch handler) in
// one call and records each task's result, as run does for one. The call
// runs under HandlerTimeout; ctx is the worker's (or the sweep's).
func (d *Dispatcher) runBatch(ctx context.Context, tasks []*Task) []result {
	name := tasks[0].Handler
	h := d.batch[name]
	bc := &batchCtx{tasks: make(map[int64]*taskCtx, len(tasks))}
	tcs := make([]*taskCtx, len(tasks))
	traces := make([]string, len(tasks))
	for i, t := range tasks {
		tcs[i] = d.newTaskCtx(t)
		bc.tasks[t.ID] = tcs[i]
		traces[i] = t.TraceID
	}
	// The batch's own trace id ties the handler's batch-wide log lines to
	// the tasks' (listed once here).
	batchTrace := newTraceID()
	blog := d.log.With("trace_id", batchTrace, "handler", name, "batch_size", len(tasks))
	blog.DebugContext(ctx, "delayed task batch started", "trace_ids", traces)
	bctx := context.WithValue(withTask(ctx, &taskCtx{traceID: batchTrace, log: blog}), batchKey{}, bc)
	hctx, cancel := context.WithTimeout(bctx, d.cfg.HandlerTimeout)
	start := time.Now()
	errs := d.callBatch(hctx, name, h, tasks)
	timedOut := hctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	res := make([]result, len(tasks))
	settled := d.settleDone(ctx, tasks, tcs, errs, start, res)
	for i, t := range tasks {
		if settled[i] {
			continue
		}
		err := errs[i]
		if err != nil && timedOut {
			err = fmt.Errorf("handler timed out after %s: %w", d.cfg.HandlerTimeout, err)
		}
		res[i] = d.settle(ctx, t, tcs[i], start, err)
	}
	return res
}

// settleDone records DONE, in one transaction per claim, for the tasks of a
// batch whose attempt succeeded, where there are several, and fills their
// results; it returns which it settled. If the write fails, it settles none
// and settle writes each on its own (with its retries).
func (d *Dispatcher) settleDone(ctx context.Context, tasks []*Task, tcs []*taskCtx, errs []error, start time.Time, res []result) []bool {
	settled := make([]bool, len(tasks))
	byClaim := map[int64][]int{}
	for i, t := range tasks {
		if errs[i] == nil {
			byClaim[t.ClaimID] = append(byClaim[t.ClaimID], i)
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for claimID, idx := range byClaim {
		if len(idx) < 2 {
			continue
		}
		ids := make([]int64, len(idx))
		for k, i := range idx {
			ids[k] = tasks[i].ID
		}
		done, err := d.store.doneMany(fctx, d.db, ids, claimID)
		if err != nil {
			d.log.WarnContext(ctx, "record delayed tasks done together; recording them one by one", "num_tasks", len(ids), "err", err)
			continue
		}
		elapsed := time.Since(start)
		for _, i := range idx {
			t := tasks[i]
			settled[i] = true
			if !done[t.ID] {
				d.counters.lost.Add(1)
				tcs[i].log.WarnContext(ctx, "delayed task result discarded: the claim was recovered and belongs to another run", "result", "done")
				res[i] = resultLost
			} else {
				d.countDone(ctx, t, tcs[i], start, elapsed)
				res[i] = resultDone
			}
			d.observe(t, start, &res[i])
		}
	}
	return settled
}

// callBatch calls a batch handler and returns exactly one error per task,
// turning a panic into an error for every task and a short or long result
// into errors for the tasks not covered.
func (d *Dispatcher) callBatch(ctx context.Context, name string, h BatchHandlerFunc, tasks []*Task) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("batch handler %s panicked: %v\n%s", name, r, debug.Stack())
			errs = make([]error, len(tasks))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	got := h(ctx, tasks)
	if len(got) == len(tasks) {
		return got
	}
	// Which result is whose cannot be told: every task is retried.
	err := fmt.Errorf("batch handler %s returned %d results for %d tasks", name, len(got), len(tasks))
	errs = make([]error, len(tasks))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// batchNames lists the batch handlers' names (for the split claim).
func (d *Dispatcher) batchNames() []string {
	names := make([]string, 0, len(d.batch))
	for n := range d.batch {
		names = append(names, n)
	}
	return names
}
