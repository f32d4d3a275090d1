package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
)

// growthAndIdle measures how ours scales with the table (one fresh table per
// size, the largest drained by a child process whose peak RSS is taken) and
// the idle tick: a run over a large table with nothing due.
func (b *closeBench) growthAndIdle(ctx context.Context) error {
	f := b.f
	executor := ""
	if !f.skip["rss"] {
		bin, ok := executorBinary(ctx, f.executor, b.tmpDir, b.out)
		if ok {
			executor = bin
		}
	}
	rssDone := false
	var drained *sqlx.DB // the largest growth table, after its drain
	drainedSize := 0
	if !f.skip["growth"] && len(f.sizes) > 0 {
		fmt.Fprintln(b.out, "growth (ours, 1 shard; each size a fresh table of the same mix):")
		fmt.Fprintf(b.out, "%9s %8s %8s %9s  %-10s %s\n", "orders", "closed", "seconds", "closed/s", "invariants", "how")
		for _, n := range f.sizes {
			inChild := n == f.rssOrders && !f.skip["rss"]
			r, how, db, err := b.drain(ctx, fmt.Sprintf("growth%d", n), n, inChild, executor)
			if err != nil {
				return err
			}
			if n > drainedSize {
				drained, drainedSize = db, n
			}
			rssDone = rssDone || inChild
			fmt.Fprintf(b.out, "%9d %8d %8.2f %9.0f  %-10s %s\n", n, r.closed, r.elapsed.Seconds(), r.rate(), r.check, how)
		}
		fmt.Fprintln(b.out)
	}
	if !f.skip["rss"] && !rssDone && f.rssOrders > 0 {
		r, how, _, err := b.drain(ctx, "rss", f.rssOrders, true, executor)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "drain of %d orders in a child: %d closed in %.2fs (%.0f/s), invariants %s; %s\n\n",
			f.rssOrders, r.closed, r.elapsed.Seconds(), r.rate(), r.check, how)
	}
	if !f.skip["idle"] && f.idleOrders > 0 {
		if err := b.idle(ctx); err != nil {
			return err
		}
		if drained != nil {
			// For comparison, not the headline figure: the drained growth
			// table keeps its whole not-yet-due share unpaid.
			c, err := ordertest.Counts(ctx, drained)
			if err != nil {
				return err
			}
			if _, err := b.ticks(ctx, drained, fmt.Sprintf("also: tick on the drained %d-order growth table (%d unpaid within their timeout)", drainedSize, c.Unpaid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// drain makes a table of n orders and closes its due orders with one shard,
// in-process or in a child process (measuring its peak RSS).
func (b *closeBench) drain(ctx context.Context, label string, n int, inChild bool, executor string) (row, string, *sqlx.DB, error) {
	db, name, err := b.dbs.migrated(ctx, label)
	if err != nil {
		return row{}, "", nil, err
	}
	gen, err := orders.GenerateDemo(ctx, db, b.spec(n))
	if err != nil {
		return row{}, "", nil, err
	}
	base, err := ordertest.Snapshot(ctx, db)
	if err != nil {
		return row{}, "", nil, err
	}
	var r row
	how := "in-process"
	if inChild {
		cr, err := drainInChild(ctx, executor, b.dbs.dsn(name), b.f.redis, b.prefix, b.f.pageSize, b.tmpDir)
		if err != nil {
			return row{}, "", nil, err
		}
		c, err := ordertest.Counts(ctx, db)
		if err != nil {
			return row{}, "", nil, err
		}
		r = row{closed: c.Closed, elapsed: cr.wall}
		if c.Closed != gen.Due {
			b.failed = append(b.failed, fmt.Sprintf("child drain of %d orders closed %d of %d due (%s)", n, c.Closed, gen.Due, cr.summary))
		}
		how = fmt.Sprintf("child %s, peak RSS %.1f MiB, wall time incl. start; it said: %s", cr.how, cr.peakMiB, cr.summary)
		b.summary["rss"] = cr.peakMiB
	} else {
		if r, err = b.ours(ctx, db, 1, gen.Due, false); err != nil {
			return row{}, "", nil, err
		}
	}
	r.check = b.check(ctx, db, base, true)
	return r, how, db, nil
}

// idle measures the cron tick with nothing to do: runs over a table of
// -idle-orders orders, all paid or closed except -idle-not-due unpaid within
// their timeout (the only rows the scan reads). Median of 7 runs.
func (b *closeBench) idle(ctx context.Context) error {
	f := b.f
	db, _, err := b.dbs.migrated(ctx, "idle")
	if err != nil {
		return err
	}
	gen, err := orders.GenerateDemo(ctx, db, orders.DemoSpec{Orders: f.idleOrders, SKUs: f.skus,
		PaidFraction: 1 - f.idleNotDueFrac, NotDueFraction: f.idleNotDueFrac, CouponFraction: f.couponFrac,
		TimeoutMinutes: 30, OrderNoPrefix: "I"})
	if err != nil {
		return err
	}
	ms, err := b.ticks(ctx, db, fmt.Sprintf("idle tick on %d orders, nothing due (%d unpaid within their timeout, the rest paid)", gen.Orders, gen.NotDue))
	b.summary["idle_ms"] = ms
	return err
}

// ticks runs 7 idle runs over db (after one to warm the buffer pool) and
// prints and returns their median duration in milliseconds.
func (b *closeBench) ticks(ctx context.Context, db *sqlx.DB, what string) (float64, error) {
	c, err := orders.NewCloser(db, b.locker, orders.CloserConfig{PageSize: b.f.pageSize})
	if err != nil {
		return 0, err
	}
	if _, err := c.Run(ctx, orders.RunOptions{}); err != nil {
		return 0, err
	}
	var ms []float64
	for range 7 {
		st, err := c.Run(ctx, orders.RunOptions{})
		if err != nil {
			return 0, err
		}
		if st.Scanned != 0 {
			return 0, fmt.Errorf("idle table: a tick found %d due orders", st.Scanned)
		}
		ms = append(ms, float64(st.Elapsed)/float64(time.Millisecond))
	}
	slices.Sort(ms)
	fmt.Fprintf(b.out, "%s: median %.1f ms of 7 runs (min %.1f, max %.1f)\n", what, ms[3], ms[0], ms[6])
	return ms[3], nil
}
