package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
)

// The -sources rows: the comparison's orders split over databases and
// tables (order.sources, docs/sharded-orders.md), closed by broadcast
// executors each sweeping its share of the units as orderTimeoutCloseJob
// does, all at once; then the same orders in a declared foreign schema
// beside our schema (close_foreign.go).

// maxSources bounds -sources: each is a database of the run's own.
const maxSources = 64

// oddExecutors closes the odd-ids layout: a count that divides no
// layout of an even number of units, so some units are split by rows,
// where ids of one parity would leave an executor idle under id % total.
const oddExecutors = 3

// sourceTmpl is one order database of the sources rows as laid out once:
// its share of the orders over its order tables, the baseline of its
// invariants (taken before the split, on order_info) and its due orders.
type sourceTmpl struct {
	name   string
	tables []string
	base   *ordertest.Baseline
	due    int
}

// copyTables are the tables a row's copy of the source takes: ours, with
// order_info and order_item empty, and the split order and item tables.
func (t *sourceTmpl) copyTables() []string {
	out := append([]string(nil), orderTables...)
	for _, table := range t.tables {
		if table != "order_info" {
			out = append(out, table, itemTable(table))
		}
	}
	return out
}

// itemTable is the item table of order table table: the same suffix
// (schema.ForTable).
func itemTable(table string) string {
	return "order_item" + strings.TrimPrefix(table, "order_info")
}

// sourcesRowResult is what a sources row measured.
type sourcesRowResult struct {
	name string
	rate float64
	skew float64 // the largest per-executor count over their mean
}

func (b *closeBench) sourcesAndForeign(ctx context.Context) error {
	f := b.f
	if f.sources == 0 {
		return nil
	}
	if !f.skip["sources"] {
		if err := b.sourcesRows(ctx); err != nil {
			return err
		}
	}
	if !f.skip["foreign"] {
		if err := b.foreignRows(ctx); err != nil {
			return err
		}
	}
	b.sourcesSummary()
	fmt.Fprintln(b.out)
	return nil
}

// sourcesRows lays the orders out over the sources and closes a fresh
// copy of them with each count of executors, then with odd ids only.
func (b *closeBench) sourcesRows(ctx context.Context) error {
	f := b.f
	fmt.Fprintf(b.out, "sources: the %d orders split over %d database(s) x %d table(s), %d units; broadcast executors, each a sweep over its share, all at once; invariants checked per database\n",
		f.orders, f.sources, f.tables, f.sources*f.tables)
	layouts := []struct {
		label, what string
		odd         bool
		counts      []int
	}{{"src", "sources, %d executor(s) at once", false, f.executors}}
	if !f.skip["odd"] {
		layouts = append(layouts, struct {
			label, what string
			odd         bool
			counts      []int
		}{"odd", "sources, odd ids only, %d executors", true, []int{oddExecutors}})
	}
	for i, l := range layouts {
		start := time.Now()
		tmpls, err := b.layOut(ctx, l.label, l.odd)
		if err != nil {
			return err
		}
		fmt.Fprintf(b.out, "%s layout made in %.1fs\n", l.label, time.Since(start).Seconds())
		if i == 0 {
			b.header()
		}
		for _, n := range l.counts {
			r, err := b.sourcesRow(ctx, tmpls, n, fmt.Sprintf(l.what, n))
			if err != nil {
				return err
			}
			if r.rate > b.sourcesBest.rate {
				b.sourcesBest = r
			}
		}
		for _, t := range tmpls {
			if err := b.dbs.drop(ctx, t.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// layOut makes one database per source with its share of the
// comparison's orders (order id % sources), each split over the order
// tables, every step one INSERT ... SELECT on the server. With odd, order
// id i becomes 2i-1: every id odd, the shape auto_increment_increment 2
// gives.
func (b *closeBench) layOut(ctx context.Context, label string, odd bool) ([]*sourceTmpl, error) {
	cols, err := b.dbs.columns(ctx, b.tmplName, "order_info")
	if err != nil {
		return nil, err
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "`" + c + "`"
		if c == "id" && odd {
			sel[i] = "`id` * 2 - 1"
		}
	}
	var out []*sourceTmpl
	for s := range b.f.sources {
		db, name, err := b.dbs.skeleton(ctx, b.tmplName, fmt.Sprintf("%s%d", label, s))
		if err != nil {
			return nil, err
		}
		t := &sourceTmpl{name: name}
		out = append(out, t)
		if err := b.dbs.execAll(ctx, "lay out "+name, sourceShareSQL(b.tmplName, name, strings.Join(cols, "`, `"), strings.Join(sel, ", "), b.f.sources, s)...); err != nil {
			return nil, err
		}
		if t.base, err = ordertest.Snapshot(ctx, db); err != nil {
			return nil, err
		}
		counts, err := ordertest.Counts(ctx, db)
		if err != nil {
			return nil, err
		}
		t.due = counts.Due
		if t.tables, err = b.split(ctx, name, odd); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sourceShareSQL copies into database to the orders of database from
// whose id % n is s (cols their columns, sel what to select for them),
// their items and coupons, and the stock, whose locked column is set to
// what this share's unpaid orders hold.
func sourceShareSQL(from, to, cols, sel string, n, s int) []string {
	return []string{
		fmt.Sprintf("INSERT INTO `%[2]s`.order_info (`%[3]s`) SELECT %[4]s FROM `%[1]s`.order_info WHERE id %% %[5]d = %[6]d", from, to, cols, sel, n, s),
		fmt.Sprintf("INSERT INTO `%[2]s`.order_item SELECT it.* FROM `%[1]s`.order_item it JOIN `%[2]s`.order_info o ON o.order_no = it.order_no", from, to),
		fmt.Sprintf("INSERT INTO `%[2]s`.user_coupon SELECT c.* FROM `%[1]s`.user_coupon c JOIN `%[2]s`.order_info o ON o.order_no = c.order_no", from, to),
		fmt.Sprintf("INSERT INTO `%[2]s`.inventory SELECT * FROM `%[1]s`.inventory", from, to),
		fmt.Sprintf(`UPDATE `+"`%[1]s`"+`.inventory v LEFT JOIN (
			SELECT it.sku_id, SUM(it.quantity) AS q FROM `+"`%[1]s`"+`.order_item it
			JOIN `+"`%[1]s`"+`.order_info o ON o.order_no = it.order_no WHERE o.status = 0 GROUP BY it.sku_id) x
			ON x.sku_id = v.sku_id SET v.locked = COALESCE(x.q, 0)`, to),
	}
}

// split moves the orders of database name's order_info, with their items,
// into order_info_0 ... and order_item_0 ... (one table: left in
// order_info). An order goes to table (k / sources) % tables, k its id
// before the odd layout's doubling: every table gets its share whatever
// the ids look like, as a shop's routing by order number does.
func (b *closeBench) split(ctx context.Context, name string, odd bool) ([]string, error) {
	n, m := b.f.sources, b.f.tables
	if m == 1 {
		return []string{"order_info"}, b.dbs.execAll(ctx, "analyze", "ANALYZE TABLE `"+name+"`.order_info")
	}
	seq := "id"
	if odd {
		seq = "(id + 1) DIV 2"
	}
	var tables, stmts []string
	for k := range m {
		ot, it := fmt.Sprintf("order_info_%d", k), fmt.Sprintf("order_item_%d", k)
		tables = append(tables, ot)
		stmts = append(stmts,
			fmt.Sprintf("CREATE TABLE `%[1]s`.%[2]s LIKE `%[1]s`.order_info", name, ot),
			fmt.Sprintf("CREATE TABLE `%[1]s`.%[2]s LIKE `%[1]s`.order_item", name, it),
			fmt.Sprintf("INSERT INTO `%[1]s`.%[2]s SELECT * FROM `%[1]s`.order_info WHERE (%[3]s DIV %[4]d) %% %[5]d = %[6]d", name, ot, seq, n, m, k),
			fmt.Sprintf("INSERT INTO `%[1]s`.%[3]s SELECT it.* FROM `%[1]s`.order_item it JOIN `%[1]s`.%[2]s o ON o.order_no = it.order_no", name, ot, it))
	}
	stmts = append(stmts, fmt.Sprintf("TRUNCATE TABLE `%s`.order_item", name), fmt.Sprintf("TRUNCATE TABLE `%s`.order_info", name))
	return tables, b.dbs.execAll(ctx, "split "+name, stmts...)
}

// sourcesRow closes a fresh copy of the sources with executors broadcast
// executors at once, each with its own close path (locks, pools) and a
// sweep over every unit, and checks each database's invariants.
func (b *closeBench) sourcesRow(ctx context.Context, tmpls []*sourceTmpl, executors int, name string) (sourcesRowResult, error) {
	dbs := make([]*sqlx.DB, len(tmpls))
	due := 0
	for i, t := range tmpls {
		db, copyName, err := b.dbs.cloneTables(ctx, t.name, fmt.Sprintf("run%d", i), t.copyTables(), t.tables...)
		if err != nil {
			return sourcesRowResult{}, err
		}
		defer b.dbs.drop(context.WithoutCancel(ctx), copyName) //nolint:errcheck // dropAll retries at the end
		dbs[i] = db
		due += t.due
	}
	sweeps, err := b.sweeps(ctx, tmpls, dbs, executors)
	if err != nil {
		return sourcesRowResult{}, err
	}
	closed := make([]int, executors)
	var g errgroup.Group
	at, err := dbNow(ctx, dbs[0])
	if err != nil {
		return sourcesRowResult{}, err
	}
	start := time.Now()
	for e, s := range sweeps {
		g.Go(func() error {
			res := s.Run(ctx, orders.SweepOptions{RunOptions: orders.RunOptions{ShardIndex: e, ShardTotal: executors}})
			closed[e] = res.Total.Closed
			return res.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return sourcesRowResult{}, fmt.Errorf("%s: %w", name, err)
	}
	r := row{name: name, elapsed: time.Since(start)}
	for _, n := range closed {
		r.closed += n
	}
	var tables []drainedTable
	for i, t := range tmpls {
		for _, table := range t.tables {
			tables = append(tables, ourTable(dbs[i], table))
		}
	}
	if err := b.drained(ctx, name, r.closed, due, at, tables); err != nil {
		return sourcesRowResult{}, err
	}
	if r.check, err = b.checkSources(ctx, tmpls, dbs); err != nil {
		return sourcesRowResult{}, err
	}
	b.emit(r)
	res := sourcesRowResult{name: name, rate: r.rate(), skew: skew(closed)}
	fmt.Fprintf(b.out, "    closed per executor: %s; skew %.2f\n", strings.Trim(fmt.Sprint(closed), "[]"), res.skew)
	return res, nil
}

// sweeps builds each executor's sweep over every unit of the sources,
// in source then table order, as OpenUnits does from order.sources.
func (b *closeBench) sweeps(ctx context.Context, tmpls []*sourceTmpl, dbs []*sqlx.DB, executors int) ([]*orders.Sweep, error) {
	out := make([]*orders.Sweep, executors)
	for e := range out {
		cp, err := newClosePath(dbs[0], b.rdb, b.prefix, b.f.pageSize, nil)
		if err != nil {
			return nil, err
		}
		var units []*orders.Closer
		for i, t := range tmpls {
			server, err := dbserver.DetectServer(ctx, dbs[i])
			if err != nil {
				return nil, err
			}
			for _, table := range t.tables {
				c, err := cp.NewUnit(dbs[i], server, fmt.Sprintf("src%d", i), table)
				if err != nil {
					return nil, err
				}
				units = append(units, c)
			}
		}
		if out[e], err = orders.NewSweep(units...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkSources checks the invariants of each source database against
// its baseline, after moving its split tables' rows back into order_info
// and order_item where ordertest reads them: "ok" when every source
// holds them, else the failing sources.
func (b *closeBench) checkSources(ctx context.Context, tmpls []*sourceTmpl, dbs []*sqlx.DB) (string, error) {
	var bad []string
	for i, t := range tmpls {
		var stmts []string
		for _, table := range t.tables {
			if table != "order_info" {
				stmts = append(stmts, "INSERT INTO order_info SELECT * FROM "+table,
					"INSERT INTO order_item SELECT * FROM "+itemTable(table))
			}
		}
		for _, q := range stmts {
			if _, err := dbs[i].ExecContext(ctx, q); err != nil {
				return "", fmt.Errorf("source %d: gather its tables for the check: %w", i, err)
			}
		}
		if v := b.check(ctx, dbs[i], t.base, true); v != "ok" {
			bad = append(bad, fmt.Sprintf("src%d %s", i, v))
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), nil
	}
	return "ok", nil
}

// skew is the largest count over the counts' mean (1 when all are equal,
// 0 when there are none).
func skew(counts []int) float64 {
	sum, most := 0, 0
	for _, n := range counts {
		sum, most = sum+n, max(most, n)
	}
	if sum == 0 {
		return 0
	}
	return float64(most) * float64(len(counts)) / float64(sum)
}

// sourcesSummary compares the best sources row with ours on the single
// table, and the declared foreign schema with ours on the same data.
func (b *closeBench) sourcesSummary() {
	ratio := func(a, c float64) string {
		if a == 0 || c == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/c)
	}
	s, best := b.summary, b.sourcesBest
	if best.rate > 0 {
		fmt.Fprintf(b.out, "sources over the single table: best (%s, %.0f/s) %s of ours, 1 shard (%.0f/s); its skew %.2f %s\n",
			best.name, best.rate, ratio(best.rate, s["ours1"]), s["ours1"], best.skew, b.f.sourcesTarget())
	}
	if b.foreignRate > 0 {
		fmt.Fprintf(b.out, "declared foreign schema over our schema on the same data: %s (%.0f/s over %.0f/s) %s\n",
			ratio(b.foreignRate, s["ourschema"]), b.foreignRate, s["ourschema"], b.f.target())
	}
}

// sourcesTarget is the note after the sources ratio, as target is.
func (f *closeFlags) sourcesTarget() string {
	if f.orders < targetOrders {
		return fmt.Sprintf("(informational at %d orders: the target, at least 0.80 with a skew of at most 1.10, is judged at %d orders or more)", f.orders, targetOrders)
	}
	return "(target: at least 0.80, skew at most 1.10)"
}

// sourcesFields are the summary line's fields of the -sources rows,
// empty without -sources so the line keeps its form.
func (b *closeBench) sourcesFields() string {
	if b.f.sources == 0 {
		return ""
	}
	return fmt.Sprintf(" sources/s=%.0f sources_skew=%.2f foreign/s=%.0f", b.sourcesBest.rate, b.sourcesBest.skew, b.foreignRate)
}
