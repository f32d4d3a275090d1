package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maintainLoop runs maintainOnce at start and every ReconcileInterval.
func (d *Dispatcher) maintainLoop(ctx context.Context) {
	tick := time.NewTicker(d.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		d.maintainOnce(ctx)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// maintainOnce measures the clock, recovers stuck claims, refills the timer
// (when it is this dispatcher's turn: see reconcileTurn) and, every
// PurgeInterval, purges old tasks. Each step logs its own error
// and the next tick tries again.
func (d *Dispatcher) maintainOnce(ctx context.Context) {
	if err := d.clock.Sync(ctx); err != nil && ctx.Err() == nil {
		d.log.WarnContext(ctx, "measure database clock", "err", err)
	}
	if rec, failed, err := d.RecoverStuck(ctx); err != nil && ctx.Err() == nil {
		d.log.ErrorContext(ctx, "recover stuck delayed tasks", "err", err)
	} else if rec+failed > 0 {
		d.log.WarnContext(ctx, "recovered delayed tasks stuck RUNNING", "num_recovered", rec, "num_failed", failed,
			"running_timeout", d.cfg.RunningTimeout.String())
	}
	turn, err := d.timer.reconcileTurn(ctx, d.cfg.ReconcileInterval*9/10)
	if err == nil && turn {
		var n int64
		if n, err = d.Reconcile(ctx); err == nil && n > 0 {
			d.log.InfoContext(ctx, "delay timer refilled from the table", "num_added", n)
		}
	}
	if err != nil && ctx.Err() == nil {
		d.log.WarnContext(ctx, "reconcile delay timer", "err", err)
	}
	if d.cfg.Retention > 0 && time.Since(d.lastPurge) >= d.cfg.PurgeInterval {
		d.lastPurge = time.Now()
		if n, err := d.client.Purge(ctx, d.cfg.Retention); err != nil && ctx.Err() == nil {
			d.log.WarnContext(ctx, "purge delayed tasks", "err", err)
		} else if n > 0 {
			d.log.InfoContext(ctx, "purged delayed tasks", "num_deleted", n, "retention", d.cfg.Retention.String())
		}
	}
}

// Reconcile brings the timer in line with the table and returns how many
// tasks it scheduled. The Redis timer gets every PENDING task due within
// ReconcileHorizon that it lacks (after Redis lost its data, this is what
// brings the tasks back: they run late by at most the time until the next
// Reconcile); the RabbitMQ timer, which cannot tell what its queues hold,
// gets the tasks whose publish was never confirmed and those overdue by
// more than RabbitMQConfig.RepublishAfter.
func (d *Dispatcher) Reconcile(ctx context.Context) (int64, error) {
	now, err := d.clock.NowSynced(ctx)
	if err != nil {
		return 0, err
	}
	return d.timer.reconcile(ctx, d.db, now, d.cfg.ReconcileHorizon)
}

// RecoverStuck ends claims RUNNING longer than RunningTimeout as failed
// attempts: back to PENDING due now, or FAILED when out of retries. A claim
// that finishes meanwhile is left alone (the write repeats its claim_id).
func (d *Dispatcher) RecoverStuck(ctx context.Context) (recovered, failed int, err error) {
	return d.recoverShard(ctx, 0, 1)
}

func (d *Dispatcher) recoverShard(ctx context.Context, shard, total int) (recovered, failed int, err error) {
	stuck, err := d.store.stuck(ctx, d.db, d.cfg.RunningTimeout, shard, total, 1000)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, t := range stuck {
		log := d.log.With("trace_id", t.TraceID, "biz_uuid", t.BizUUID, "task_id", t.ID, "handler", t.Handler)
		msg := fmt.Sprintf("recovered: RUNNING since %s, longer than %s (its dispatcher stopped or lost the database)",
			t.UpdatedAt.Format(time.RFC3339Nano), d.cfg.RunningTimeout)
		var ok bool
		if retryAllowed(t.RetryCount+1, t.MaxRetry) {
			ok, err = d.store.retry(ctx, d.db, t, time.Time{}, msg) // due now
			if ok {
				recovered++
				d.reschedule(ctx, log, timerEntry{ID: t.ID, Time: d.clock.Now(), Attempt: t.RetryCount + 2})
			}
		} else {
			ok, err = d.store.failed(ctx, d.db, t, msg+"; out of retries")
			if ok {
				failed++
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("recover task %d: %w", t.ID, err))
			continue
		}
		if ok {
			d.counters.recovered.Add(1)
			log.WarnContext(ctx, "recovered a delayed task stuck RUNNING", "retry_count", t.RetryCount+1,
				"max_retry", t.MaxRetry, "failed", !retryAllowed(t.RetryCount+1, t.MaxRetry))
		}
	}
	return recovered, failed, errors.Join(errs...)
}

// SweepOptions shape one Sweep.
type SweepOptions struct {
	Limit      int // most tasks claimed; default 1000
	ShardIndex int // this run's shard, 0-based
	ShardTotal int // number of shards; 0 or 1 for all
}

// SweepResult counts what a Sweep did.
type SweepResult struct {
	Recovered int // stuck claims put back to PENDING
	Failed    int // stuck claims out of retries, and attempts that failed for good
	Found     int // due tasks missed by the timer
	Claimed   int // of those, claimed by this sweep (the rest went to others)
	Done      int
	Retried   int
	NotNow    int // could not run now; rescheduled without spending a retry
	NotDue    int // came before their due time; moved to it
	Released  int
	Lost      int
}

// String is the summary line the sweep job reports.
func (r SweepResult) String() string {
	return fmt.Sprintf("found=%d claimed=%d done=%d retried=%d failed=%d released=%d lost=%d recovered=%d not_now=%d not_due=%d",
		r.Found, r.Claimed, r.Done, r.Retried, r.Failed, r.Released, r.Lost, r.Recovered, r.NotNow, r.NotDue)
}

// Add adds o's counts to r: the sweeps of several databases' dispatchers
// reported as one.
func (r *SweepResult) Add(o SweepResult) {
	r.Recovered += o.Recovered
	r.Failed += o.Failed
	r.Found += o.Found
	r.Claimed += o.Claimed
	r.Done += o.Done
	r.Retried += o.Retried
	r.NotNow += o.NotNow
	r.NotDue += o.NotDue
	r.Released += o.Released
	r.Lost += o.Lost
}

func (r *SweepResult) count(res result) {
	switch res {
	case resultDone:
		r.Done++
	case resultRetry:
		r.Retried++
	case resultFailed:
		r.Failed++
	case resultReleased:
		r.Released++
	case resultLost:
		r.Lost++
	case resultNotNow:
		r.NotNow++
	case resultNotDue:
		r.NotDue++
	}
}

// Sweep is the safety net behind the timer: it recovers stuck claims, then
// finds PENDING tasks due for longer than SweepGrace in its shard (shard.Of(id,
// total) = index) and runs them, up to Workers handler calls at a time (the
// tasks of a batch handler grouped into calls as the poller does), and
// waits for them. A task is claimed only when a worker is free to start it
// at once, as the poller does, so its RUNNING age is its handler's and
// recovery elsewhere never takes a task waiting here. It needs no Start.
// Cancelling ctx stops claiming and gives unfinished claims back.
func (d *Dispatcher) Sweep(ctx context.Context, opt SweepOptions) (SweepResult, error) {
	var res SweepResult
	if opt.Limit <= 0 {
		opt.Limit = 1000
	}
	if opt.ShardTotal <= 0 {
		opt.ShardTotal = 1
	}
	if opt.ShardIndex < 0 || opt.ShardIndex >= opt.ShardTotal {
		return res, fmt.Errorf("delay: sweep shard %d of %d is out of range", opt.ShardIndex, opt.ShardTotal)
	}
	if err := d.clock.Sync(ctx); err != nil {
		return res, err
	}
	rec, failed, err := d.recoverShard(ctx, opt.ShardIndex, opt.ShardTotal)
	res.Recovered, res.Failed = rec, failed
	if err != nil {
		return res, err
	}
	ids, err := d.store.due(ctx, d.db, d.cfg.SweepGrace, opt.ShardIndex, opt.ShardTotal, opt.Limit)
	if err != nil {
		return res, err
	}
	res.Found = len(ids)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, d.cfg.Workers)
	for len(ids) > 0 && ctx.Err() == nil {
		held := holdSlots(ctx, slots, d.cfg.Workers)
		if held == 0 {
			break
		}
		// As many ids as the slots held can run: one each, or whole
		// batches of batch handlers (see popLimit); the claim takes no
		// more single-handler tasks than slots.
		n := min(len(ids), held)
		if len(d.batch) > 0 {
			n = min(len(ids), d.popLimit(held))
		}
		chunk := ids[:n]
		ids = ids[n:]
		items := d.group(d.claim(ctx, chunk, d.clock.Now(), held))
		mu.Lock()
		for _, it := range items {
			res.Claimed += max(len(it.batch), 1)
		}
		mu.Unlock()
		for i, it := range items {
			if i >= held {
				slots <- struct{}{} // not expected: claim keeps items within held
				held++
			}
			wg.Go(func() {
				defer func() { <-slots }()
				rs := d.execute(ctx, it)
				mu.Lock()
				defer mu.Unlock()
				for _, r := range rs {
					res.count(r)
				}
			})
		}
		for range held - len(items) {
			<-slots
		}
	}
	wg.Wait()
	return res, ctx.Err()
}

// holdSlots waits for one free slot of slots (capacity workers), then takes
// every other one free at once, and returns how many it holds (0 when ctx
// ended first).
func holdSlots(ctx context.Context, slots chan struct{}, workers int) int {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	held := 1
	for held < workers {
		select {
		case slots <- struct{}{}:
			held++
		default:
			return held
		}
	}
	return held
}
