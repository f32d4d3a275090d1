package orders

import (
	"context"
	"time"

	"github.com/orderjob/executor/orders/orderlock"
)

// Observer receives what the close path did, for metrics. The Closer (and,
// given the same Observer in orderlock.Config, the Locker) calls it
// synchronously on the goroutine doing the work, at page granularity (plus
// one lateness per closed order), so its methods must be cheap and must not
// block. ctx is the caller's: the context of the XXL-JOB run or delayed task
// that called Run or CloseOrder, which an adapter may read labels from. A
// nil Observer in CloserConfig means none.
type Observer interface {
	// ClosePage is called after each page of Run, and after each
	// CloseOrder call that reached a decision (a page of one).
	ClosePage(ctx context.Context, p PageReport)
	// OrdersClosed is called after a close transaction committed, with the
	// lateness of each order it closed: close time minus deadline
	// (create_time + timeout_minutes), both on the database clock. The
	// slice is reused: read it during the call only.
	OrdersClosed(ctx context.Context, lateness []time.Duration)
	// LocksAcquired sees each Locker.Acquire, when the Locker was given
	// this Observer too.
	orderlock.Observer
}

// PageReport is what one page did. For a page of Run, Scanned is the sum of
// the other counts (Closed through SkippedNotDue); for a dry run, Closed is
// what would have been closed and nothing else is counted. LockErrors and
// LeaseLost are parts of SkippedLocked.
type PageReport struct {
	// Source and Table are the unit closed in: the order database
	// (CloserConfig.SourceName) and its order table.
	Source, Table          string
	ShardIndex, ShardTotal int  // the run's shard; 0 and 1 for CloseOrder
	DryRun                 bool // nothing was changed
	Single                 bool // a CloseOrder call, not a page of Run

	Scanned       int // orders looked at
	Closed        int // closed
	DeadLettered  int // close failed; recorded in order_dead_letter
	SkippedPaid   int // paid before we locked it
	SkippedLocked int // lock held elsewhere, Redis failing, or lease lost
	SkippedClosed int // closed or deleted by someone else (CloseOrder: also not found)
	SkippedNotDue int // not due when read under lock
	SkippedParked int // CloseOrder only: its dead letter is parked (Run filters those before scanning)

	LockErrors int // of SkippedLocked: Redis failed (CloseOrder: the skip came with any error, the payment side's included)
	LeaseLost  int // of SkippedLocked: rolled back, the lease ran out before commit
	// Conflicts: close transactions of the page rolled back by a deadlock,
	// a lock wait or a certification conflict (RunStats.Conflicts).
	Conflicts int

	// The payment-side close step (pages of Run only): TradePaid of
	// SkippedPaid, the payment side said the order is paid; TradeErrors of
	// SkippedLocked, its close-trade call failed and the order stays open.
	TradePaid, TradeErrors int
}

// observePage reports one page of Run.
func (c *Closer) observePage(ctx context.Context, opt RunOptions, scanned int, pr pageResult) {
	if c.cfg.Observer == nil {
		return
	}
	c.cfg.Observer.ClosePage(ctx, PageReport{Source: c.Source(), Table: c.Table(),
		ShardIndex: opt.ShardIndex, ShardTotal: opt.ShardTotal, DryRun: opt.DryRun,
		Scanned: scanned, Closed: pr.closed, DeadLettered: pr.deadLettered,
		SkippedPaid: pr.paid, SkippedLocked: pr.locked, SkippedClosed: pr.gone, SkippedNotDue: pr.notDue,
		LockErrors: pr.lockErrors, LeaseLost: pr.leaseLost, Conflicts: pr.conflicts,
		TradePaid: pr.tradePaid, TradeErrors: pr.tradeErrors,
	})
}

// observeOne reports a CloseOrder call; calls that failed before deciding
// (the database unreachable) are not reported.
func (c *Closer) observeOne(ctx context.Context, out Outcome, err error) {
	if c.cfg.Observer == nil || out == 0 {
		return
	}
	p := PageReport{Source: c.Source(), Table: c.Table(), ShardTotal: 1, Single: true, Scanned: 1}
	switch out {
	case OutcomeClosed:
		p.Closed = 1
	case OutcomeDeadLettered:
		p.DeadLettered = 1
	case OutcomeSkippedPaid:
		p.SkippedPaid = 1
	case OutcomeSkippedLocked:
		p.SkippedLocked = 1
		if err != nil {
			p.LockErrors = 1
		}
	case OutcomeNotDue:
		p.SkippedNotDue = 1
	case OutcomeParked:
		p.SkippedParked = 1
	default: // closed before, not found
		p.SkippedClosed = 1
	}
	c.cfg.Observer.ClosePage(ctx, p)
}

// lateness returns how late each of the closed candidates is closed, or nil
// without an observer (so the close path pays nothing for it).
func (c *Closer) lateness(closed []*candidate, closeTime time.Time) []time.Duration {
	if c.cfg.Observer == nil || len(closed) == 0 {
		return nil
	}
	late := make([]time.Duration, len(closed))
	for i, cd := range closed {
		late[i] = closeTime.Sub(cd.CreateTime.Add(time.Duration(cd.TimeoutMinutes) * time.Minute))
	}
	return late
}

// observeClosed reports the lateness of a committed close transaction.
func (c *Closer) observeClosed(ctx context.Context, late []time.Duration) {
	if c.cfg.Observer != nil && len(late) > 0 {
		c.cfg.Observer.OrdersClosed(ctx, late)
	}
}
