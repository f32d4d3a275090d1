package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/statslie"
	"github.com/orderjob/executor/orders"
)

// growthRow is one drain of the growth measurement: a fresh table of size
// orders, drained right after its bulk load, with its statistics as InnoDB
// left them or lying.
type growthRow struct {
	size int
	lie  statslie.Lie // 0: as the bulk load left them
}

func (g growthRow) statistics() string {
	if g.lie == 0 {
		return "fresh after bulk load"
	}
	return "lying: " + g.lie.String()
}

// growthAndIdle measures how ours scales with the table (one fresh table per
// row, drained right after its bulk load; the rows of the largest size by an
// `executor run` child whose peak RSS is taken), the same with lying
// statistics, and the idle tick: a run over a large table with nothing due.
func (b *closeBench) growthAndIdle(ctx context.Context) error {
	f := b.f
	executor := ""
	if !f.skip["rss"] {
		bin, ok := executorBinary(ctx, f.executor, b.tmpDir, b.out)
		if ok {
			executor = bin
		}
	}
	var kept growthKept
	if rows := b.growthRows(); len(rows) > 0 {
		if err := b.growth(ctx, rows, executor, &kept); err != nil {
			return err
		}
	}
	if !f.skip["rss"] && !kept.rssDone && f.rssOrders > 0 {
		r, how, _, err := b.drain(ctx, "rss", growthRow{size: f.rssOrders}, true, executor)
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
		if kept.db != nil {
			// For comparison, not the headline figure: the drained growth
			// table keeps its whole not-yet-due share unpaid, and some of
			// those fall due while the bench runs (they were placed within
			// the last 15 minutes of their 30): the ticks close them and
			// say how many.
			c, err := ordertest.Counts(ctx, kept.db)
			if err != nil {
				return err
			}
			if _, err := b.ticks(ctx, kept.db, fmt.Sprintf("also: tick on the drained %d-order growth table (%d unpaid, placed within their timeout)", kept.size, c.Unpaid), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// growthKept is what the growth rows leave for the steps after them.
type growthKept struct {
	db      *sqlx.DB // the largest fresh growth table, after its drain
	size    int
	name    string
	rssDone bool // a fresh row's drain ran in a child, its RSS taken
}

// growthRows are the growth and lying-statistics rows asked for, by size.
func (b *closeBench) growthRows() []growthRow {
	var rows []growthRow
	if !b.f.skip["growth"] {
		for _, n := range b.f.sizes {
			rows = append(rows, growthRow{size: n})
		}
	}
	if !b.f.skip["lying"] {
		for _, n := range b.f.lying {
			rows = append(rows, growthRow{size: n, lie: statslie.OneValue})
		}
	}
	slices.SortStableFunc(rows, func(a, c growthRow) int { return a.size - c.size })
	return rows
}

// growth drains a fresh table per row and prints the growth table and its
// summary, keeping the largest fresh table in kept.
func (b *closeBench) growth(ctx context.Context, rows []growthRow, executor string, kept *growthKept) error {
	ref := b.summary["ours1"]
	fmt.Fprintf(b.out, "growth (ours, 1 shard; each row a fresh table of the same mix, drained right after its bulk load; vs ref: the rate over the rate of %d orders above):\n", b.f.orders)
	fmt.Fprintf(b.out, "%9s  %-30s %8s %8s %9s %7s  %-11s %-22s %-10s %s\n",
		"orders", "statistics", "closed", "seconds", "closed/s", "vs ref", "load 1m", "unhinted items plan", "invariants", "how")
	for _, g := range rows {
		if err := b.growthLine(ctx, g, executor, ref, kept); err != nil {
			return err
		}
	}
	if err := b.growthSummary(ctx, rows); err != nil {
		return err
	}
	fmt.Fprintln(b.out)
	return nil
}

// growthLine drains the row's fresh table (in an executor child when its
// size is -rss-orders) and prints its line.
func (b *closeBench) growthLine(ctx context.Context, g growthRow, executor string, ref float64, kept *growthKept) error {
	inChild := g.size == b.f.rssOrders && !b.f.skip["rss"]
	label := fmt.Sprintf("growth%d", g.size)
	if g.lie != 0 {
		label = fmt.Sprintf("lying%d", g.size)
	}
	waited := b.dbs.settle(ctx, settleLimit)
	load0 := loadAverage1()
	r, how, db, err := b.drain(ctx, label, g, inChild, executor)
	if err != nil {
		return err
	}
	load := load0 + "→" + loadAverage1()
	if waited > time.Second {
		how = fmt.Sprintf("%s; started after a purge wait of %s", how, waited)
	}
	// Keep the largest fresh table for the drained-table tick; drop
	// the others now, so the next rows have the buffer pool and
	// the disk to themselves.
	drop := r.dbName
	if g.lie == 0 && g.size > kept.size {
		drop = kept.name
		kept.db, kept.size, kept.name = db, g.size, r.dbName
	}
	if drop != "" {
		if err := b.dbs.drop(ctx, drop); err != nil {
			return err
		}
	}
	kept.rssDone = kept.rssDone || (inChild && g.lie == 0)
	vs := "-"
	if ref > 0 {
		vs = fmt.Sprintf("%.2f", r.rate()/ref)
		b.summary[fmt.Sprintf("growth_%d_%d", g.size, g.lie)] = r.rate() / ref
	}
	fmt.Fprintf(b.out, "%9d  %-30s %8d %8.2f %9.0f %7s  %-11s %-22s %-10s %s\n",
		g.size, g.statistics(), r.closed, r.elapsed.Seconds(), r.rate(), vs, load, r.oldPlan, r.check, how)
	return nil
}

// growthSummary prints how the drain rate changes from the reference size
// to the largest growth rows: the cost of a close must follow the due orders,
// not the table. The load of a shared machine drifts over the minutes the
// growth rows take, so the reference is measured again after them (a fresh
// copy of the same 200,000 orders, ours with 1 shard) and the largest rows
// are set against the mean of both references as well.
func (b *closeBench) growthSummary(ctx context.Context, rows []growthRow) error {
	ref := b.summary["ours1"]
	if ref == 0 || len(rows) == 0 || b.tmplName == "" {
		return nil
	}
	db, name, err := b.dbs.cloneDB(ctx, b.tmplName, "ours1again")
	if err != nil {
		return err
	}
	b.dbs.settle(ctx, settleLimit)
	load0 := loadAverage1()
	again, err := b.ours(ctx, db, 1, b.due, false)
	if err != nil {
		return err
	}
	if err := b.dbs.drop(ctx, name); err != nil {
		return err
	}
	mean := (ref + again.rate()) / 2
	fmt.Fprintf(b.out, "reference again after the growth rows (ours, 1 shard, a fresh copy of the %d orders): %.0f/s, load 1m %s→%s; first %.0f/s, mean %.0f/s\n",
		b.f.orders, again.rate(), load0, loadAverage1(), ref, mean)
	top := rows[len(rows)-1].size
	var parts []string
	for _, g := range rows {
		if g.size == top {
			r := b.summary[fmt.Sprintf("growth_%d_%d", g.size, g.lie)] * ref
			parts = append(parts, fmt.Sprintf("%s %.2f of the first, %.2f of the mean", g.statistics(), r/ref, r/mean))
		}
	}
	fmt.Fprintf(b.out, "drain rate at %d orders over the rate at %d: %s %s\n",
		top, b.f.orders, strings.Join(parts, "; "), b.f.target())
	return nil
}

// drain makes a table of g.size orders and closes its due orders with one
// shard right after the bulk load, in-process or in a child process
// (measuring its peak RSS). With g.lie the statistics of the order tables
// lie (package statslie) from before the drain until the table is dropped.
func (b *closeBench) drain(ctx context.Context, label string, g growthRow, inChild bool, executor string) (row, string, *sqlx.DB, error) {
	db, name, err := b.dbs.migrated(ctx, label)
	if err != nil {
		return row{}, "", nil, err
	}
	gen, err := orderdemo.Generate(ctx, db, b.spec(g.size))
	if err != nil {
		return row{}, "", nil, err
	}
	base, err := ordertest.Snapshot(ctx, db)
	if err != nil {
		return row{}, "", nil, err
	}
	if g.lie != 0 {
		truth, err := statslie.Tell(ctx, db, g.lie, orderTables...)
		b.dbs.onDrop(name, truth)
		if err != nil {
			return row{}, "", nil, err
		}
	}
	oldPlan := unhintedItemsPlan(ctx, db)
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
			b.failed = append(b.failed, fmt.Sprintf("child drain of %d orders closed %d of %d due (%s)", g.size, c.Closed, gen.Due, cr.summary))
		}
		how = fmt.Sprintf("child %s, peak RSS %.1f MiB, wall time incl. start; it said: %s", cr.how, cr.peakMiB, cr.summary)
		if g.lie == 0 {
			b.summary["rss"] = cr.peakMiB
		}
	} else {
		if r, err = b.ours(ctx, db, 1, gen.Due, false); err != nil {
			return row{}, "", nil, err
		}
	}
	r.check = b.check(ctx, db, base, true)
	r.oldPlan, r.dbName = oldPlan, name
	return r, how, db, nil
}

// unhintedItemsPlanSQL is the order-item lookup of a 500-order page as it was
// written before it named idx_order_no: the bench shows what the optimizer
// would make of it on each growth table, to say which tables are in the
// state that used to flip the drain to a full scan per page.
const unhintedItemsPlanSQL = `EXPLAIN SELECT order_no, sku_id, quantity FROM order_item WHERE order_no IN (?)`

// unhintedItemsPlan is EXPLAIN's "type key rows" of unhintedItemsPlanSQL for
// 500 due orders of db, e.g. "ALL - 2053905" (a full scan) or
// "range idx_order_no 1000".
func unhintedItemsPlan(ctx context.Context, db *sqlx.DB) string {
	var nos []string
	if err := db.SelectContext(ctx, &nos, `SELECT order_no FROM order_info WHERE status = 0 ORDER BY id LIMIT 500`); err != nil || len(nos) == 0 {
		return "?"
	}
	q, args, err := sqlx.In(unhintedItemsPlanSQL, nos)
	if err != nil {
		return "?"
	}
	var plan []struct {
		Type sql.NullString `db:"type"`
		Key  sql.NullString `db:"key"`
		Rows sql.NullInt64  `db:"rows"`
	}
	if err := db.Unsafe().SelectContext(ctx, &plan, q, args...); err != nil || len(plan) != 1 {
		return "?"
	}
	key := cmp.Or(plan[0].Key.String, "-")
	return fmt.Sprintf("%s %s %d", plan[0].Type.String, key, plan[0].Rows.Int64)
}

// settleLimit bounds the wait for InnoDB's purge before a measurement.
const settleLimit = 2 * time.Minute

// idleTimeoutMinutes is the payment timeout of the idle-tick table's orders:
// a year, so the unpaid ones, placed within the first half of it, stay not
// due however long the bench runs.
const idleTimeoutMinutes = 365 * 24 * 60

// idle measures the cron tick with nothing to do: runs over a table of
// -idle-orders orders, all paid except -idle-not-due unpaid within their
// timeout (the only rows the scan reads). Median of 7 runs.
func (b *closeBench) idle(ctx context.Context) error {
	f := b.f
	db, _, err := b.dbs.migrated(ctx, "idle")
	if err != nil {
		return err
	}
	gen, err := orderdemo.Generate(ctx, db, orderdemo.Spec{Orders: f.idleOrders, SKUs: f.skus,
		PaidFraction: 1 - f.idleNotDueFrac, NotDueFraction: f.idleNotDueFrac, CouponFraction: f.couponFrac,
		TimeoutMinutes: idleTimeoutMinutes, OrderNoPrefix: "I"})
	if err != nil {
		return err
	}
	ms, err := b.ticks(ctx, db, fmt.Sprintf("idle tick on %d orders, nothing due (%d unpaid within their timeout, the rest paid)", gen.Orders, gen.NotDue), false)
	b.summary["idle_ms"] = ms
	return err
}

// ticks runs 7 idle runs over db (after one to warm the buffer pool) and
// prints and returns their median duration in milliseconds. With
// mayFallDue, orders that fell due while the bench ran are closed by the
// runs and counted in the line; without, any due order is an error (the
// table was built so that none can be).
func (b *closeBench) ticks(ctx context.Context, db *sqlx.DB, what string, mayFallDue bool) (float64, error) {
	c, err := newCloser(db, b.rdb, b.prefix, b.f.pageSize, nil)
	if err != nil {
		return 0, err
	}
	st, err := c.Run(ctx, orders.RunOptions{})
	if err != nil {
		return 0, err
	}
	fellDue := st.Scanned
	var ms []float64
	for range 7 {
		st, err := c.Run(ctx, orders.RunOptions{})
		if err != nil {
			return 0, err
		}
		fellDue += st.Scanned
		if st.Scanned != 0 && !mayFallDue {
			return 0, fmt.Errorf("idle table: a tick found %d due orders", st.Scanned)
		}
		ms = append(ms, float64(st.Elapsed)/float64(time.Millisecond))
	}
	slices.Sort(ms)
	note := ""
	if fellDue > 0 {
		note = fmt.Sprintf("; %d order(s) fell due meanwhile and were closed by these runs", fellDue)
	}
	fmt.Fprintf(b.out, "%s: median %.1f ms of 7 runs (min %.1f, max %.1f)%s\n", what, ms[3], ms[0], ms[6], note)
	return ms[3], nil
}
