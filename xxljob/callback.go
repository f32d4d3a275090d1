package xxljob

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxCallbackBatch bounds one /api/callback POST. Java 2.x sends everything
// queued at once, 3.4 at most 50 per POST; 100 keeps bodies small under load.
const maxCallbackBatch = 100

// callbacker delivers run results to the admin. One sender goroutine takes
// everything queued and POSTs it as one array; what no admin accepts goes to
// the spool on disk and is retried by spoolLoop.
type callbacker struct {
	client   *adminClient
	spool    *spool
	logs     *logStore
	obs      Observer
	log      *slog.Logger
	interval time.Duration // spool retry period

	mu        sync.Mutex
	queue     []callbackParam
	closed    bool
	lastSpool int           // last count given to the observer, -1 before the first
	notify    chan struct{} // cap 1: queue became non-empty
}

func newCallbacker(client *adminClient, sp *spool, logs *logStore, obs Observer, log *slog.Logger, interval time.Duration) *callbacker {
	return &callbacker{
		client: client, spool: sp, logs: logs, obs: obs, interval: interval,
		log:       log.With("component", "xxljob.callback"),
		notify:    make(chan struct{}, 1),
		lastSpool: -1,
	}
}

// push queues one result. It never blocks. After the sender was closed (only
// reachable through a bug in the shutdown order) the item goes straight to
// the spool, so no result is lost.
func (c *callbacker) push(p callbackParam) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.spoolBatch([]callbackParam{p})
		return
	}
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *callbacker) take() []callbackParam {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), maxCallbackBatch)
	if n == 0 {
		return nil
	}
	batch := make([]callbackParam, n)
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
			if !c.deliver(ctx, batch, false) {
				c.spoolBatch(batch)
			}
			select {
			case <-stop:
				return // flush takes the rest
			default:
			}
		}
	}
}

// flush sends what is left after the sender stopped, spooling what no admin
// accepts. Later pushes go straight to the spool.
func (c *callbacker) flush(ctx context.Context) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	failed := false // after one failure the admins are down: spool the rest at once
	for batch := c.take(); batch != nil; batch = c.take() {
		if failed || ctx.Err() != nil || !c.deliver(ctx, batch, false) {
			failed = true
			c.spoolBatch(batch)
		}
	}
}

// deliver POSTs one batch and appends the outcome to each item's run log.
// Spool retries (retry) log only their success: one "callback fail" line per
// run is enough during a long admin outage.
func (c *callbacker) deliver(ctx context.Context, batch []callbackParam, retry bool) bool {
	err := c.client.post(ctx, adminCallback, batch)
	c.obs.CallbackSent(len(batch), err)
	line := lineCallbackFinish
	if err != nil {
		if retry {
			c.log.DebugContext(ctx, "spooled callbacks still not delivered", "batch_size", len(batch), "error", err)
			return false
		}
		line = lineCallbackFail + err.Error()
		c.log.WarnContext(ctx, "callback not delivered", "batch_size", len(batch), "error", err)
	}
	now := time.Now()
	for _, p := range batch {
		rl, perr := c.logs.open(p.LogID, p.LogDateTim, nil)
		if perr == nil {
			rl.entry(now, slog.LevelInfo, line)
		}
	}
	return err == nil
}

func (c *callbacker) spoolBatch(batch []callbackParam) {
	n, err := c.spool.write(batch)
	if err != nil {
		// Nothing else can keep these results: say which ones are lost.
		ids := make([]int64, len(batch))
		for i, p := range batch {
			ids[i] = p.LogID
		}
		c.log.Error("callback results lost: spool write failed", "log_ids", ids, "error", err)
		return
	}
	c.reportSpool(n)
	c.log.Warn("callback results spooled to disk", "batch_size", len(batch), "spool_files", n)
}

// reportSpool tells the observer the spool size when it changed.
func (c *callbacker) reportSpool(n int) {
	c.mu.Lock() // held while calling the observer so reports stay in order
	defer c.mu.Unlock()
	if n != c.lastSpool {
		c.lastSpool = n
		c.obs.CallbackSpool(n)
	}
}

// spoolLoop retries the spool at start and every interval until stop closes.
func (c *callbacker) spoolLoop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		c.retrySpool(ctx, stop)
		t.Reset(c.interval)
	}
}

// retrySpool re-sends spooled batches, oldest first. A file is removed only
// once an admin accepted its batch; the round stops at the first failure
// (the admins are most likely down).
func (c *callbacker) retrySpool(ctx context.Context, stop <-chan struct{}) {
	names, err := c.spool.list()
	if err != nil {
		c.log.ErrorContext(ctx, "read callback spool", "error", err)
		return
	}
	c.reportSpool(len(names))
	for _, name := range names {
		select {
		case <-stop:
			return
		default:
		}
		batch, err := c.spool.read(name)
		if err != nil {
			c.log.ErrorContext(ctx, "unreadable callback spool file set aside", "file", name, "error", err)
			c.spool.setAside(name)
			continue
		}
		if len(batch) > 0 && !c.deliver(ctx, batch, true) {
			return
		}
		n, err := c.spool.remove(name)
		if err != nil {
			c.log.ErrorContext(ctx, "remove delivered spool file", "file", name, "error", err)
			continue
		}
		c.reportSpool(n)
		c.log.InfoContext(ctx, "spooled callback results delivered", "batch_size", len(batch), "spool_files", n)
	}
}
