package orders

import (
	"context"
	"time"
)

// page is one scan page made ready for closing: its due orders (less those
// whose dead letter holds them back) and, unless in a dry run, the lease of
// their Redis locks. err ends the run.
type page struct {
	rows  []scanRow
	lease *Lease
	lerr  error
	err   error

	detail *pageDetail // CloseOrders: where closePage records each order's outcome (Run: nil)
}

// scan walks the shard's due orders in keyset pages (see scanPageSQL) and
// sends each page, locked, on out; it closes out when the keyset range is
// exhausted, MaxOrders is reached, ctx is cancelled or a read fails (sent as
// a page with err). Out is unbuffered, so it works one page ahead of the
// closer. A page it cannot hand over has its locks released here.
func (c *Closer) scan(ctx context.Context, opt RunOptions, now time.Time, out chan<- page) {
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
	cur := firstCursor
	scanned := 0
	for ctx.Err() == nil {
		limit := opt.PageSize
		if opt.MaxOrders > 0 {
			if limit = min(limit, opt.MaxOrders-scanned); limit <= 0 {
				return
			}
		}
		rows, err := c.store.scanPage(ctx, c.db, cur, now, opt.ShardIndex, opt.ShardTotal, limit)
		if err != nil {
			send(page{err: err})
			return
		}
		if len(rows) == 0 {
			return
		}
		last := rows[len(rows)-1]
		cur = scanCursor{CreateTime: last.CreateTime, ID: last.ID}
		full := len(rows) == limit
		if rows, err = c.skipDeadLetters(ctx, rows, now); err != nil {
			send(page{err: err})
			return
		}
		scanned += len(rows)
		p := page{rows: rows}
		if !opt.DryRun && len(rows) > 0 {
			p.lease, p.lerr = c.lock(ctx, rows)
		}
		if !send(p) || !full {
			return
		}
	}
}

// lock takes the Redis locks of a page's orders, in one pipeline per node.
func (c *Closer) lock(ctx context.Context, rows []scanRow) (*Lease, error) {
	nos := make([]string, len(rows))
	for i, r := range rows {
		nos[i] = r.OrderNo
	}
	return c.lockNos(ctx, nos)
}

// lockNos takes the locks of the orders nos without ctx's cancellation (a
// half-taken set is never left behind: Acquire releases what it does not
// return, and the caller releases the lease), bounded by the lock calls'
// timeouts.
func (c *Closer) lockNos(ctx context.Context, nos []string) (*Lease, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.locker.Timeout())
	defer cancel()
	return c.locker.Acquire(ctx, nos)
}

// skipDeadLetters drops the orders whose close dead letter waits for its
// retry time or is parked: the sweep leaves them alone.
func (c *Closer) skipDeadLetters(ctx context.Context, rows []scanRow, now time.Time) ([]scanRow, error) {
	nos := make([]string, len(rows))
	for i, r := range rows {
		nos[i] = r.OrderNo
	}
	blocked, err := c.store.blocked(ctx, c.db, nos, now)
	if err != nil || len(blocked) == 0 {
		return rows, err
	}
	out := rows[:0:0]
	for _, r := range rows {
		if !blocked[r.OrderNo] {
			out = append(out, r)
		}
	}
	return out, nil
}
