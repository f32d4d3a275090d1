package orders

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/orderlock"
)

// page is one scan page made ready for closing: its due orders (less those
// whose dead letter holds them back), what their close needs besides, and,
// when the scanner locks ahead, the lease of their Redis locks. err ends
// the run.
type page struct {
	rows []scanRow
	pageData
	lease *orderlock.Lease
	lerr  error
	err   error

	detail *pageDetail // CloseOrders: where closePage records each order's outcome (Run: nil)
}

// pageData is what the close of a page's orders needs besides their rows,
// read before the close transaction and without locks.
type pageData struct {
	// items are the orders' lines by order number (lines never change
	// after an order is placed, so they can be read ahead); nil: the close
	// transaction reads them.
	items map[string][]itemRow
	// letters holds the orders with a waiting close dead letter, which
	// their close resolves. Orders without one cost the close no
	// statement.
	letters map[string]bool
}

// scan walks the shard's due orders in keyset pages (see closesql.Statements.ScanPage) and
// sends each page on out; it closes out when the keyset range is exhausted,
// MaxOrders is reached, ctx is cancelled or a read fails (sent as a page
// with err). Out is unbuffered, so it works one page ahead of the closer.
//
// It reads the page's dead letters (see letterFilter) and its orders' lines
// and locks its orders ahead too, so that these round trips overlap the
// previous page's close transaction, which then only writes, unless the page's close would start on an aged
// lease: with a rate cap (the pacer waits first) or a payment step (whose
// budget is counted from the lock), the closer locks each page when it
// begins. A page it cannot hand over has its locks released here.
//
// With MaxOrders, the run starts where the shard's last capped run stopped
// (order_close_cursor) and, at the end of the range, wraps around to the
// head and goes on up to where it started: orders that never close (a
// lock held elsewhere, a payment the payment side reports but that never
// arrives) cannot hold the cap at the head, and every due order is tried at
// least once every ceil(due / MaxOrders) runs. Without MaxOrders every run
// walks the whole range from the head.
func (c *Closer) scan(ctx context.Context, opt RunOptions, clock runClock, out chan<- page) {
	defer close(out)
	send := func(p page) bool {
		select {
		case out <- p:
			return true
		case <-ctx.Done():
			c.release(ctx, p.lease)
			return false
		}
	}
	lockAhead := !opt.DryRun && !c.lockAtClose(opt)
	cur := firstCursor
	var resume *scanCursor // where a capped run resumed; nil: from the head
	if opt.MaxOrders > 0 {
		saved, ok, err := c.store.closeCursor(ctx, c.db, c.Table(), opt.ShardIndex, opt.ShardTotal)
		if err != nil {
			send(page{err: err})
			return
		}
		if ok {
			cur, resume = saved, &saved
		}
	}
	letters := letterFilter{c: c, now: clock.now}
	wrapped := false
	scanned := 0
	for ctx.Err() == nil {
		limit := opt.PageSize
		if opt.MaxOrders > 0 {
			if limit = min(limit, opt.MaxOrders-scanned); limit <= 0 {
				c.saveCursor(ctx, opt, &cur) // the next run goes on from here
				return
			}
		}
		rows, err := c.store.scanPage(ctx, c.db, cur, clock.shop, opt.ShardIndex, opt.ShardTotal, limit)
		if err != nil {
			send(page{err: err})
			return
		}
		full := len(rows) == limit
		if wrapped {
			// The second lap ends where the first began.
			if k := cutAfter(rows, *resume); k < len(rows) {
				rows, full = rows[:k], false
			}
		}
		if len(rows) > 0 {
			last := rows[len(rows)-1]
			cur = scanCursor{CreateTime: last.CreateTime, ID: last.ID}
			p := page{}
			if p.rows, p.letters, err = letters.filter(ctx, rows); err == nil && !opt.DryRun {
				p.items, err = c.pageItems(ctx, p.rows)
			}
			if err != nil {
				send(page{err: err})
				return
			}
			scanned += len(p.rows)
			if lockAhead && len(p.rows) > 0 {
				p.lease, p.lerr = c.lock(ctx, p.rows)
			}
			if !send(p) {
				return
			}
		}
		if full {
			continue
		}
		if resume != nil && !wrapped {
			wrapped, cur = true, firstCursor
			continue
		}
		if opt.MaxOrders > 0 {
			c.saveCursor(ctx, opt, nil) // the whole range was seen: the next run starts at the head
		}
		return
	}
}

// cutAfter returns how many of rows (in key order) are at or before c.
func cutAfter(rows []scanRow, c scanCursor) int {
	for i, r := range rows {
		if r.CreateTime.After(c.CreateTime) || (r.CreateTime.Equal(c.CreateTime) && r.ID > c.ID) {
			return i
		}
	}
	return len(rows)
}

// saveCursor records where the next capped run of the shard starts (nil:
// at the head). A dry run records nothing. A failed write only means the
// next run starts elsewhere, so it is logged.
func (c *Closer) saveCursor(ctx context.Context, opt RunOptions, cur *scanCursor) {
	if opt.DryRun || ctx.Err() != nil {
		return
	}
	if err := c.store.setCloseCursor(ctx, c.db, c.Table(), opt.ShardIndex, opt.ShardTotal, cur); err != nil {
		c.log.WarnContext(ctx, "save where the next capped run starts", "shard_index", opt.ShardIndex,
			"shard_total", opt.ShardTotal, "error", err.Error())
	}
}

// lockAtClose reports whether a run takes each page's locks when its close
// begins rather than ahead: when the pacer may wait between pages, or a
// payment step spends part of the lease on calls.
func (c *Closer) lockAtClose(opt RunOptions) bool {
	return opt.MaxPerSecond > 0 || c.cfg.TradeCloser != nil
}

// freshLease makes sure p's orders are locked with a lease that has at
// least half the TTL left, as the close of a page expects: taken now if
// the scanner did not lock ahead, or taken again if the page waited.
func (c *Closer) freshLease(ctx context.Context, p *page) {
	if len(p.rows) == 0 || (p.lease != nil && p.lease.ValidFor(c.locker.TTL()/2)) {
		return
	}
	c.release(ctx, p.lease)
	p.lease, p.lerr = c.lock(ctx, p.rows)
}

// lock takes the Redis locks of a page's orders, in one pipeline per node.
func (c *Closer) lock(ctx context.Context, rows []scanRow) (*orderlock.Lease, error) {
	return c.lockNos(ctx, orderNos(rows))
}

// lockNos takes the locks of the orders nos without ctx's cancellation (a
// half-taken set is never left behind: Acquire releases what it does not
// return, and the caller releases the lease), bounded by the lock calls'
// timeouts. Every close path (Run, CloseOrder, CloseOrders) locks here, and
// every one follows the rule for Redis failures, which the rest of the
// package refers to:
//
// An order whose lock the lease does not hold is never closed and never
// dead-lettered, whether someone else holds the lock or Redis failed to
// answer (Lease.Failed: no quorum); it is skipped (OutcomeSkippedLocked,
// RunStats.SkippedLocked) and the next pass tries again. A Redis failure is
// told apart from contention by carrying its error (RunStats.LockErrors and
// LockErr, Result.Err, CloseOrder's error).
func (c *Closer) lockNos(ctx context.Context, nos []string) (*orderlock.Lease, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.locker.Timeout())
	defer cancel()
	return c.locker.Acquire(ctx, nos)
}

// letterFilter drops, page by page, the orders whose close dead letter
// waits for its retry time or is parked (the sweep leaves them alone), and
// tells which of the others have a waiting letter for their close to
// resolve. It reads the open letters (closesql.OpenLetters), up to one more than
// the page has orders: one short read when there are few, usually none.
// When there are more, it probes the page's orders instead
// (closesql.LetterStates), for this page and the rest of the run. Either way a
// page costs at most about two reads per order, and a run with no open
// letter one read per page.
type letterFilter struct {
	c     *Closer
	now   time.Time
	probe bool // too many open letters: probe each page's orders
}

func (f *letterFilter) filter(ctx context.Context, rows []scanRow) ([]scanRow, map[string]bool, error) {
	var states []letterState
	var err error
	if !f.probe {
		if states, err = f.c.store.openLetters(ctx, f.c.db, len(rows)+1); err != nil {
			return nil, nil, err
		}
		f.probe = len(states) > len(rows)
	}
	if f.probe {
		if states, err = f.c.store.letterStates(ctx, f.c.db, orderNos(rows)); err != nil {
			return nil, nil, err
		}
	}
	if len(states) == 0 {
		return rows, nil, nil
	}
	blocked := map[string]bool{}
	var waiting map[string]bool
	for _, l := range states {
		switch {
		case l.Status == deadletters.Parked || l.NextRetryAt.After(f.now):
			blocked[l.OrderNo] = true
		default:
			if waiting == nil {
				waiting = map[string]bool{}
			}
			waiting[l.OrderNo] = true
		}
	}
	out := rows[:0:0]
	for _, r := range rows {
		if !blocked[r.OrderNo] {
			out = append(out, r)
		}
	}
	return out, waiting, nil
}

// pageItems reads the lines of the orders of rows, by itemKey. The read
// is causal (sqlexec.CausalRead): on a Galera node it waits until the
// node has applied what the cluster committed. The lines are read outside
// the close transaction and never written by it, so certification does not
// guard them: a node still applying an order placed through another node
// would otherwise see the order without its lines, and the close would give
// back none of its stock (measured: one multi-writer run in five).
func (c *Closer) pageItems(ctx context.Context, rows []scanRow) (map[string][]itemRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	var by map[string][]itemRow
	err := sqlexec.CausalRead(ctx, c.db, func(q sqlx.QueryerContext) error {
		var err error
		by, err = c.readItems(ctx, q, rows)
		return err
	})
	return by, err
}

func orderNos(rows []scanRow) []string {
	nos := make([]string, len(rows))
	for i, r := range rows {
		nos[i] = r.OrderNo
	}
	return nos
}
