package xxljob

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxCallbackBatch bounds one /api/callback POST, as the Java executor's
// callback queue does from 3.4 on (TriggerCallbackThreadHelper's
// MessageQueue, batch 50; 2.x sent everything queued at once). The spool's
// retries send batches of the same size.
const maxCallbackBatch = 50

// callbacker delivers run results to the admin. Each result is first
// written to the spool (see spool.go), then queued in memory for one sender
// goroutine that POSTs what is queued as one batch. A batch no admin accepts
// on its first attempt is left to the spool's retry loop, and so is every
// result that finds the memory queue full: memory stays bounded however long
// the admin hangs, and nothing waits in memory only.
type callbacker struct {
	client   *adminClient
	spool    *spool
	logs     *logStore
	obs      Observer
	log      *slog.Logger
	interval time.Duration // spool retry period
	size     int           // memory queue bound

	mu        sync.Mutex
	queue     []spoolItem
	reserved  int // places taken by pushes writing to the spool
	closed    bool
	lastSpool int           // last count given to the observer, -1 before the first
	notify    chan struct{} // cap 1: queue became non-empty
	nudge     chan struct{} // cap 1: results wait on disk and an admin answers
}

func newCallbacker(client *adminClient, logs *logStore, obs Observer, log *slog.Logger, interval time.Duration, size int) *callbacker {
	return &callbacker{
		client: client, logs: logs, obs: obs, interval: interval, size: size,
		log:       log.With("component", "xxljob.callback"),
		notify:    make(chan struct{}, 1),
		nudge:     make(chan struct{}, 1),
		lastSpool: -1,
	}
}

// push reports one result: persist, then queue at once.
func (c *callbacker) push(p callbackParam) { c.persist(p, spoolRef{})() }

// pushAll reports several results at once, as push does each, with one
// fsync for all of them: the triggers a kill or a cover drops from a long
// queue are reported before the admin's call is answered, and one fsync
// each made that answer outlast the admin's 3 s timeout.
func (c *callbacker) pushAll(ps []callbackParam) {
	rooms := make([]bool, len(ps))
	for i := range rooms {
		rooms[i] = c.reserve()
	}
	refs, errs := c.spool.appendAll(ps)
	for i, p := range ps {
		c.enqueue(p, refs[i], rooms[i], errs[i])
	}
}

// reserve takes a place in the memory queue for a result about to be
// persisted, and says whether there was one.
func (c *callbacker) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := !c.closed && len(c.queue)+c.reserved < c.size
	if room {
		c.reserved++
	}
	return room
}

// persist writes one result to the spool (or, if the disk fails, keeps it
// for memory only) and returns the function that queues it for delivery. A
// run's result is persisted before its log's last lines are written and
// queued after them, so the admin, which ends its log page once it has the
// result, has the whole log by then, and a crash in between loses nothing.
// After the sender closed (only results of runs cancelled at shutdown come
// late) the result is left on disk for the next start.
//
// start (if set) is the run's start record, acknowledged once the result is
// durable and before it can be delivered (the result is written as held in
// memory, out of the retry loop's reach, until then): the spool never holds
// a delivered result's run as unfinished. A result the disk refused leaves
// the start as it is, so a crash before delivery still reports the run.
func (c *callbacker) persist(p callbackParam, start spoolRef) (queue func()) {
	room := c.reserve()
	ref, err := c.spool.append(p, true)
	if err == nil && start.seg != nil {
		if aerr := c.spool.ack([]spoolRef{start}); aerr != nil {
			c.log.Warn("mark a run's start finished; a restart reports it from its result", "log_id", p.LogID, "error", aerr)
		}
	}
	// A result with no room in memory stays out of the retry loop's reach
	// too until queue runs: enqueue releases it, after the log's last lines.
	return func() { c.enqueue(p, ref, room, err) }
}

// enqueue hands a persisted result to the sender, or to the retry loop when
// it took no place in the memory queue.
func (c *callbacker) enqueue(p callbackParam, ref spoolRef, room bool, err error) {
	c.mu.Lock()
	if room {
		c.reserved--
	}
	switch {
	case err == nil && room && !c.closed:
		c.queue = append(c.queue, spoolItem{p: p, ref: ref})
		c.mu.Unlock()
		c.signal(c.notify)
		return
	case err == nil: // on disk for the retry loop (the queue was full, or closed meanwhile)
		c.mu.Unlock()
		c.spool.release([]spoolRef{ref})
	case !c.closed && len(c.queue) < 2*c.size:
		// The disk failed: memory is all that is left. The bound is
		// stretched (to twice its size) rather than a result dropped.
		// A record written whose fsync failed goes with it, to be marked
		// when the result is delivered.
		c.queue = append(c.queue, spoolItem{p: p, ref: ref, unsynced: ref.seg != nil})
		c.mu.Unlock()
		c.log.Error("callback spool write failed; result kept in memory only", "log_id", p.LogID, "error", err)
		c.signal(c.notify)
		return
	case ref.seg != nil:
		// No room in memory, but the record is in the spool (its fsync
		// failed): the retry loop sends it from the file.
		c.mu.Unlock()
		c.spool.release([]spoolRef{ref})
		c.log.Warn("callback result not durable: the spool fsync failed and the memory queue is full or closed; the retry loop sends it from the spool file, a crash before then may lose it",
			"log_id", p.LogID, "error", err)
	default:
		c.mu.Unlock()
		c.log.Error("callback result lost: the spool cannot be written and the memory queue is full or closed", "log_id", p.LogID, "error", err)
		return
	}
	c.reportSpool()
	c.signal(c.nudge)
}

func (c *callbacker) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *callbacker) take() []spoolItem {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), maxCallbackBatch)
	if n == 0 {
		return nil
	}
	batch := make([]spoolItem, n)
	copy(batch, c.queue)
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	return batch
}

// run is the sender loop; it returns when stop is closed, leaving what is
// still queued to flush.
func (c *callbacker) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-c.notify:
		}
		for batch := c.take(); batch != nil; batch = c.take() {
			c.first(ctx, batch)
			select {
			case <-stop:
				return // flush takes the rest
			default:
			}
		}
	}
}

// first makes the first delivery attempt of a queued batch. Accepted, the
// results are marked delivered; refused, they are left to the retry loop.
func (c *callbacker) first(ctx context.Context, batch []spoolItem) bool {
	ok := c.deliver(ctx, batch, false)
	refs := itemRefs(batch)
	if ok {
		if err := c.spool.ack(refs); err != nil {
			c.log.WarnContext(ctx, "mark callbacks delivered; they may be sent again after a restart", "error", err)
		}
		if c.spool.pending() > 0 {
			c.signal(c.nudge) // an admin answers again: deliver what waits on disk now
		}
	} else {
		c.spool.release(refs)
		c.unpersisted(ctx, batch)
	}
	c.reportSpool()
	return ok
}

// unpersisted writes to the spool the results of a refused batch that
// never reached it durably (the disk had failed when they came), for the
// retry loop. A record whose fsync fails is still in the spool, waiting on
// disk: the retry loop reads it back from the file and delivers it (and a
// restart does, if the disk kept it), so only a crash before then can lose
// it. A result that cannot be written at all is lost (it is no longer in
// memory either) unless an earlier, unsynced record of it is in the spool:
// the caller released that one to the retry loop. A new record replaces
// such an earlier one.
func (c *callbacker) unpersisted(ctx context.Context, batch []spoolItem) {
	for _, it := range batch {
		if it.ref.seg != nil && !it.unsynced {
			continue
		}
		ref, err := c.spool.append(it.p, false)
		if it.unsynced && ref.seg != nil {
			if aerr := c.spool.ack([]spoolRef{it.ref}); aerr != nil {
				c.log.WarnContext(ctx, "mark a callback result re-written; it may be sent twice", "log_id", it.p.LogID, "error", aerr)
			}
		}
		switch {
		case err == nil:
		case ref.seg != nil || it.unsynced:
			c.log.WarnContext(ctx, "callback result not durable: the spool fsync failed; the retry loop sends it from the spool file, a crash before then may lose it",
				"log_id", it.p.LogID, "error", err)
		default:
			c.log.ErrorContext(ctx, "callback result lost: not accepted and the spool cannot be written", "log_id", it.p.LogID, "error", err)
		}
	}
}

// flush sends what is left after the sender stopped, once; what no admin
// accepts stays in the spool for the next start.
func (c *callbacker) flush(ctx context.Context) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	failed := false // after one failure the admins are down: leave the rest at once
	for batch := c.take(); batch != nil; batch = c.take() {
		if failed || ctx.Err() != nil {
			c.spool.release(itemRefs(batch))
			c.unpersisted(ctx, batch)
			continue
		}
		failed = !c.first(ctx, batch)
	}
	c.reportSpool()
}

// deliver POSTs one batch and appends the outcome to each item's run log.
// Spool retries (retry) log only their success: one "callback fail" line per
// run is enough during a long admin outage.
func (c *callbacker) deliver(ctx context.Context, batch []spoolItem, retry bool) bool {
	ps := make([]callbackParam, len(batch))
	for i, it := range batch {
		ps[i] = it.p
	}
	err := c.client.callback(ctx, ps)
	c.obs.CallbackSent(len(batch), err)
	line := lineCallbackFinish
	if err != nil {
		if retry {
			c.log.DebugContext(ctx, "spooled callbacks still not delivered", "batch_size", len(batch), "error", err)
			return false
		}
		line = lineCallbackFail + err.Error()
		c.log.WarnContext(ctx, "callback not delivered, left to the spool", "batch_size", len(batch), "error", err)
	}
	now := time.Now()
	for _, p := range ps {
		rl, perr := c.logs.open(p.LogID, p.LogDateTim, nil)
		if perr == nil {
			rl.entry(now, slog.LevelInfo, line)
		}
	}
	return err == nil
}

// reportSpool tells the observer the number of results waiting on disk
// when it changed.
func (c *callbacker) reportSpool() {
	n := c.spool.pending()
	c.mu.Lock() // held while calling the observer so reports stay in order
	defer c.mu.Unlock()
	if n != c.lastSpool {
		c.lastSpool = n
		c.obs.CallbackSpool(n)
	}
}

// spoolLoop retries the spool at start, every interval and when nudged,
// until stop closes.
func (c *callbacker) spoolLoop(ctx context.Context, stop <-chan struct{}) {
	repeat(stop, c.nudge, c.interval, func() bool {
		c.retrySpool(ctx, stop)
		return true
	})
}

// retrySpool re-sends results waiting on disk, oldest first, and stops at
// the first batch no admin accepts (the admins are most likely down).
func (c *callbacker) retrySpool(ctx context.Context, stop <-chan struct{}) {
	c.reportSpool()
	delivered := 0
	err := c.spool.diskBatches(maxCallbackBatch, func(batch []spoolItem) bool {
		select {
		case <-stop:
			return false
		default:
		}
		if !c.deliver(ctx, batch, true) {
			return false
		}
		if err := c.spool.ack(itemRefs(batch)); err != nil {
			c.log.WarnContext(ctx, "mark callbacks delivered; they may be sent again after a restart", "error", err)
		}
		delivered += len(batch)
		c.reportSpool()
		return true
	})
	if err != nil {
		c.log.ErrorContext(ctx, "read callback spool", "error", err)
	}
	if delivered > 0 {
		c.log.InfoContext(ctx, "spooled callback results delivered", "num_delivered", delivered, "num_waiting", c.spool.pending())
	}
}

func itemRefs(batch []spoolItem) []spoolRef {
	refs := make([]spoolRef, 0, len(batch))
	for _, it := range batch {
		if it.ref.seg != nil {
			refs = append(refs, it.ref)
		}
	}
	return refs
}
