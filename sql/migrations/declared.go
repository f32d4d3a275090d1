package migrations

import (
	"fmt"
	"slices"
	"strings"

	orderschema "github.com/orderjob/executor/orders/schema"
)

// This file checks the shop's declared tables (order.schema) against what
// the close needs of them. Nothing here changes a table: each problem
// carries the statement a DBA would run, or the setting to correct.

// kinds of column type the close can use, as family() names them.
var (
	kindInteger = []string{"integer"}
	kindAmount  = []string{"integer", "decimal"}
	kindTime    = []string{"datetime", "timestamp"}
	kindText    = []string{"string", "enum"}
)

// need is a column the close reads or writes.
type need struct {
	key   string   // the order.schema setting naming it
	name  string   // lower case
	kinds []string // nil: any type
	// add is the definition an ADD COLUMN would give a column the shop can
	// add (a stamp of the close); "" for columns that must exist.
	add string
	// optional: the setting may be '' (none) instead, as user may, which
	// only the order view reads.
	optional bool
}

// tableCheck collects the problems of one declared table.
type tableCheck struct {
	name  string // as declared
	t     *table // nil when missing
	probs []Problem
}

// tableNone is what leaving out each table that may be left out means.
// Their keys default to the executor's own tables (inventory,
// user_coupon), which a shop declaring its schema rarely has.
var tableNone = map[string]string{
	"stock.table":  "a close gives no stock back",
	"coupon.table": "orders carry no coupon",
}

func newTableCheck(live schema, key, name string) *tableCheck {
	c := &tableCheck{name: name, t: live[strings.ToLower(name)]}
	switch {
	case c.t == nil:
		fix := fmt.Sprintf("create it, or name the shop's table in order.schema.%s", key)
		if none, ok := tableNone[key]; ok {
			fix += fmt.Sprintf("; or set order.schema.%s to '' (%s)", key, none)
		}
		c.problem("table "+name, "is missing", fix)
	case c.t.Engine != "" && !strings.EqualFold(c.t.Engine, "InnoDB"):
		c.problem("table "+name, fmt.Sprintf("is %s; the close changes it in one transaction with the others", c.t.Engine),
			fmt.Sprintf("ALTER TABLE %s ENGINE=InnoDB", orderschema.Quote(name)))
	}
	return c
}

func (c *tableCheck) problem(obj, detail, fix string) {
	c.probs = append(c.probs, Problem{Table: c.name, Object: obj, Detail: detail, Fix: fix, Source: SkippedFor})
}

// column checks that n exists with a usable type and returns it (nil when
// the table or the column is missing).
func (c *tableCheck) column(n need) *column {
	if c.t == nil || n.name == "" {
		return nil
	}
	col := c.t.column(strings.ToLower(n.name))
	if col == nil {
		fix := fmt.Sprintf("name the column in order.schema.%s (%s has %s)", n.key, c.name, c.columnNames())
		if n.optional {
			fix += fmt.Sprintf("; or set order.schema.%s to '' (none)", n.key)
		}
		if n.add != "" {
			fix = fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s, ALGORITHM=INSTANT; or set order.schema.%s to '' (none)",
				orderschema.Quote(c.name), orderschema.Quote(n.name), n.add, n.key)
		}
		c.problem("column "+n.name, "is missing", fix)
		return nil
	}
	if n.kinds != nil && !slices.Contains(n.kinds, family(col.Type)) {
		c.problem("column "+n.name, fmt.Sprintf("is %s; order.schema.%s needs %s", strings.ToUpper(col.Type), n.key, kindWords(n.kinds)),
			fmt.Sprintf("name a column of that kind in order.schema.%s", n.key))
	}
	return col
}

func (c *tableCheck) columnNames() string {
	names := make([]string, len(c.t.Columns))
	for i, col := range c.t.Columns {
		names[i] = col.Name
	}
	return strings.Join(names, ", ")
}

func kindWords(kinds []string) string {
	words := map[string]string{"integer": "an integer type", "decimal": "DECIMAL", "datetime": "DATETIME",
		"timestamp": "TIMESTAMP", "string": "a text type", "enum": "ENUM"}
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = words[k]
	}
	return strings.Join(out, " or ")
}

// sameKind checks that col of this table (named by setting key) and other
// of table otherTable (setting otherKey), which the close compares, are of
// one kind of type: comparing a text with an integer converts every row.
func (c *tableCheck) sameKind(col *column, key string, other *column, otherTable, otherKey string) {
	if col == nil || other == nil || family(col.Type) == family(other.Type) {
		return
	}
	c.problem("column "+col.Name, fmt.Sprintf("is %s but %s.%s, which the close compares it with, is %s",
		strings.ToUpper(col.Type), otherTable, other.Name, strings.ToUpper(other.Type)),
		fmt.Sprintf("name columns of one kind in order.schema.%s and order.schema.%s", key, otherKey))
}

// unique checks that col alone is the primary key or a unique key: the
// close reads and changes exactly one row per value.
func (c *tableCheck) unique(key, col, why string) {
	if c.t == nil || c.t.column(strings.ToLower(col)) == nil {
		return
	}
	want := []string{strings.ToLower(col)}
	if slices.ContainsFunc(c.t.Indexes, func(ix index) bool { return ix.Unique && slices.Equal(ix.Columns, want) }) {
		return
	}
	name := indexName("uk_", col)
	c.problem("unique key over "+col, fmt.Sprintf("is missing (order.schema.%s): %s", key, why),
		fmt.Sprintf("CREATE UNIQUE INDEX %s ON %s (%s) ALGORITHM=INPLACE LOCK=NONE",
			orderschema.Quote(name), orderschema.Quote(c.name), orderschema.Quote(col)))
}

// primary checks that col alone is the primary key: the close finds its
// rows by FORCE INDEX (PRIMARY).
func (c *tableCheck) primary(key, col, why string) {
	if c.t == nil || c.t.column(strings.ToLower(col)) == nil {
		return
	}
	if pk := c.t.index("primary"); pk != nil && slices.Equal(pk.Columns, []string{strings.ToLower(col)}) {
		return
	}
	c.problem("primary key over "+col, fmt.Sprintf("is missing (order.schema.%s): %s", key, why),
		fmt.Sprintf("name the table's primary key in order.schema.%s", key))
}

// leadingIndex checks that the index called name exists and starts with
// cols (InnoDB appends the primary key to every secondary index, so a
// primary-key column may be left implicit). alt is the setting to point at
// another index.
func (c *tableCheck) leadingIndex(key, name string, cols []string, why string) {
	if c.t == nil || slices.ContainsFunc(cols, func(n string) bool { return c.t.column(n) == nil }) {
		return // a missing column is reported once, as such
	}
	ix := c.t.index(strings.ToLower(name))
	if ix != nil && startsWith(c.effective(*ix), cols) {
		return
	}
	quoted := make([]string, len(cols))
	for i, col := range cols {
		quoted[i] = orderschema.Quote(col)
	}
	create := func(n string) string {
		return fmt.Sprintf("CREATE INDEX %s ON %s (%s) ALGORITHM=INPLACE LOCK=NONE",
			orderschema.Quote(n), orderschema.Quote(c.name), strings.Join(quoted, ", "))
	}
	over := strings.Join(cols, ", ")
	if twin := c.serving(cols); twin != "" {
		c.problem("index "+name, fmt.Sprintf("is missing or not over (%s) (%s)", over, why),
			fmt.Sprintf("set order.schema.%s: %s (it is over (%s)); or %s", key, twin, over, create(name)))
		return
	}
	if ix == nil {
		c.problem("index "+name, fmt.Sprintf("is missing (%s)", why), create(name))
		return
	}
	other := indexName("idx_", strings.Join(cols, "_"))
	if c.t.index(other) != nil || other == strings.ToLower(name) {
		other = indexName("idx_close_", cols[0])
	}
	c.problem("index "+name, fmt.Sprintf("is over (%s); %s needs (%s)", strings.Join(ix.Columns, ", "), why, over),
		fmt.Sprintf("%s, then set order.schema.%s: %s", create(other), key, other))
}

// effective is the index's columns as InnoDB keeps them: a secondary
// index ends with the primary key's columns it does not hold already.
func (c *tableCheck) effective(ix index) []string {
	cols := slices.Clone(ix.Columns)
	if ix.Name == "primary" {
		return cols
	}
	if pk := c.t.index("primary"); pk != nil {
		for _, col := range pk.Columns {
			if !slices.Contains(cols, col) {
				cols = append(cols, col)
			}
		}
	}
	return cols
}

// serving names another index of the table that starts with cols.
func (c *tableCheck) serving(cols []string) string {
	for _, ix := range c.t.Indexes {
		if startsWith(c.effective(ix), cols) {
			return ix.Name
		}
	}
	return ""
}

func startsWith(have, want []string) bool {
	return len(have) >= len(want) && slices.Equal(have[:len(want)], want)
}

// indexName is prefix + rest, cut to MySQL's 64 characters.
func indexName(prefix, rest string) string {
	n := strings.ToLower(prefix + rest)
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// statusKinds is the kind of column a status value compares with without
// a conversion per row: an integer value needs an integer column (a text
// column compared with 0 converts every row and walks no index), a text
// value a text or ENUM column.
func statusKinds(v orderschema.Value) []string {
	if strings.HasPrefix(v.SQL(), "'") {
		return kindText
	}
	return kindInteger
}

// statusValue is a status value and the order.schema setting declaring it.
type statusValue struct {
	key string
	v   orderschema.Value
}

// enumHolds checks that an ENUM column col has each declared status
// value among its members: the scan would find no order in a state the
// column cannot hold, silently, every run, and a close setting one would
// fail (or, without a strict sql_mode, write an empty string). The server
// compares an ENUM's members without regard to case, and so does this
// check.
func (c *tableCheck) enumHolds(col *column, values ...statusValue) {
	if col == nil || family(col.Type) != "enum" {
		return
	}
	members := enumMembers(col.Type)
	var missing, keys []string
	for _, sv := range values {
		if !slices.ContainsFunc(members, func(m string) bool { return strings.EqualFold(m, sv.v.String()) }) {
			missing = append(missing, sv.v.SQL()+" (order.schema."+sv.key+")")
			keys = append(keys, "order.schema."+sv.key)
		}
	}
	if len(missing) == 0 {
		return
	}
	c.problem("column "+col.Name, fmt.Sprintf("is an ENUM of %s, without %s: no row can hold it",
		strings.Join(members, ", "), strings.Join(missing, " nor ")),
		fmt.Sprintf("set %s to members of the ENUM", strings.Join(keys, " and ")))
}

// enumMembers are the members of a normalized ENUM column type,
// "enum('wait_pay','paid')", without their quotes.
func enumMembers(typ string) []string {
	list, ok := strings.CutPrefix(typ, "enum(")
	if !ok {
		return nil
	}
	list = strings.TrimSuffix(list, ")")
	var out []string
	for m := range strings.SplitSeq(strings.Trim(list, "'"), "','") {
		out = append(out, strings.ReplaceAll(m, "''", "'"))
	}
	return out
}

// declaredProblems checks the declared tables in live: each table, the
// columns the close reads and writes and their kinds of type, the unique
// keys it relies on (order id and number, stock key, coupon id, giveback
// keys), the scan's index and the item table's index. byEvents leaves out
// the stock and coupon tables (outbox compensation gives them back
// elsewhere).
func declaredProblems(sch orderschema.Schema, live schema, byEvents bool) []Problem {
	oc, orderNo := ordersProblems(sch.Orders, live)
	probs := oc.probs
	probs = append(probs, itemsProblems(sch, orderNo, live, byEvents)...)
	if c := sch.Coupon; c != nil {
		probs = append(probs, couponProblems(c, oc.view(), live, byEvents)...)
	}
	for _, g := range sch.Extra {
		probs = append(probs, givebackProblems(g, oc.view(), live)...)
	}
	return dedupe(probs) // a table may be declared twice (a giveback to the order table)
}

// view is another check of the same table collecting its own problems
// (a missing table is reported once, by the first).
func (c *tableCheck) view() *tableCheck { return &tableCheck{name: c.name, t: c.t} }

// ordersProblems checks the order table; it returns the check and the
// order number's column (nil when missing).
func ordersProblems(o orderschema.Orders, live schema) (*tableCheck, *column) {
	oc := newTableCheck(live, "table", o.Table)
	id := oc.column(need{key: "id", name: o.ID, kinds: kindInteger})
	orderNo := oc.column(need{key: "orderNo", name: o.OrderNo})
	oc.column(need{key: "user", name: o.User, optional: true})
	status := oc.column(need{key: "status", name: o.Status, kinds: statusKinds(o.Unpaid)})
	oc.enumHolds(status, statusValue{"unpaid", o.Unpaid}, statusValue{"closed", o.Closed})
	oc.timeColumn(o.TimeUnit, need{key: "createTime", name: o.CreateTime})
	oc.column(need{key: "timeoutColumn", name: o.TimeoutColumn, kinds: kindInteger})
	oc.timeColumn(o.TimeUnit, need{key: "dueTime", name: o.DueTime})
	oc.timeColumn(o.TimeUnit, need{key: "closeTime", name: o.CloseTime, add: stampDef(o.TimeUnit)})
	oc.timeColumn(o.TimeUnit, need{key: "updateTime", name: o.UpdateTime, add: stampDef(o.TimeUnit)})
	oc.column(need{key: "closeReason", name: o.CloseReason, kinds: kindText, add: "VARCHAR(32) NULL"})
	oc.softDelete(o.SoftDelete)
	if id != nil {
		oc.unique("id", o.ID, "the close changes one order by its id")
	}
	if orderNo != nil {
		oc.unique("orderNo", o.OrderNo, "locks, the close log and dead letters name one order by its number")
	}
	scan := []string{strings.ToLower(o.Status), strings.ToLower(o.ScanTime()), strings.ToLower(o.ID)}
	by := "creation time"
	if o.DueTime != "" {
		by = "due time"
	}
	oc.leadingIndex("scanIndex", o.ScanIndex, scan, "the scan walks unpaid orders by "+by+" and id")
	return oc, orderNo
}

// softDelete checks the soft-delete column and that its live value can
// be in it, as the status values are checked against the status column:
// a value of the wrong kind converts every row the scan reads, or matches
// none, and then no order is ever closed, silently.
func (c *tableCheck) softDelete(d orderschema.SoftDelete) {
	const key, valueKey = "softDelete.column", "order.schema.softDelete.liveValue"
	col := c.column(need{key: key, name: d.Column, optional: true})
	if col == nil {
		return
	}
	typ, fam := strings.ToUpper(col.Type), family(col.Type)
	problem := func(detail, fix string) { c.problem("column "+col.Name, detail, fix) }
	switch {
	case d.Live.IsZero():
		if !col.Nullable {
			problem(fmt.Sprintf("is NOT NULL; %s empty means NULL marks a live order, so no order would ever be closed", valueKey),
				fmt.Sprintf("set %s to the value of an order that is not deleted", valueKey))
		}
	case slices.Equal(statusKinds(d.Live), kindInteger) && (fam == "string" || fam == "enum"):
		problem(fmt.Sprintf("is %s but %s %s is an integer", typ, valueKey, d.Live),
			fmt.Sprintf("quote the value to compare it as a text: %s: \"'%s'\"", valueKey, d.Live))
	case !slices.Contains(statusKinds(d.Live), fam):
		problem(fmt.Sprintf("is %s; %s %s needs %s", typ, valueKey, d.Live.SQL(), kindWords(statusKinds(d.Live))),
			fmt.Sprintf("leave %s empty when NULL marks a live order (deleted_at), or name the flag column in order.schema.%s", valueKey, key))
	default:
		c.enumHolds(col, statusValue{"softDelete.liveValue", d.Live})
	}
}

// stampDef is the definition of a close stamp column the shop may add,
// in the declared time unit.
func stampDef(u orderschema.TimeUnit) string {
	switch u {
	case orderschema.EpochSeconds:
		return "INT UNSIGNED NULL"
	case orderschema.EpochMillis:
		return "BIGINT NULL"
	}
	return "DATETIME(3) NULL"
}

// epochTypes are the integer types that hold a time in each epoch unit:
// seconds need 32 bits (INT UNSIGNED lasts until 2106, INT until 2038),
// milliseconds 64.
var epochTypes = map[orderschema.TimeUnit][]string{
	orderschema.EpochSeconds: {"INT", "BIGINT"},
	orderschema.EpochMillis:  {"BIGINT"},
}

// timeColumn checks a time column the schema names (n.key is createTime,
// dueTime, closeTime or updateTime) against order.schema.timeUnit, which
// applies to all of them: DATETIME or TIMESTAMP for datetime, an integer
// type wide enough for the epoch units. A column of the other kind
// suggests the unit it fits.
func (c *tableCheck) timeColumn(u orderschema.TimeUnit, n need) {
	col := c.column(n)
	if col == nil {
		return
	}
	typ, fam := strings.ToUpper(col.Type), family(col.Type)
	base := baseType(typ) // INT, BIGINT, ... without a width or UNSIGNED
	needs := kindWords(kindTime)
	if u.Epoch() {
		needs = strings.Join(epochTypes[u], " or ")
	}
	// problem says what the unit needs; with the unit named when the
	// fix is another unit.
	problem := func(withUnit bool, fix string) {
		with := ""
		if withUnit || u.Epoch() {
			with = " with order.schema.timeUnit: " + u.String()
		}
		c.problem("column "+col.Name, fmt.Sprintf("is %s; order.schema.%s%s needs %s", typ, n.key, with, needs), fix)
	}
	fits := "" // the epoch units an integer column can hold
	switch base {
	case "BIGINT":
		fits = "epochMillis (or epochSeconds)"
	case "INT":
		fits = "epochSeconds"
	}
	switch {
	case !u.Epoch() && slices.Contains(kindTime, fam), u.Epoch() && slices.Contains(epochTypes[u], base):
		return
	case fam == "integer" && fits != "":
		problem(true, fmt.Sprintf("set order.schema.timeUnit: %s, if %s holds Unix epoch times", fits, col.Name))
	case u.Epoch() && slices.Contains(kindTime, fam):
		problem(true, "set order.schema.timeUnit: datetime (or leave it out)")
	default:
		problem(false, fmt.Sprintf("name a column of that kind in order.schema.%s", n.key))
	}
}

// itemsProblems checks the item table and, unless stock goes back by
// events, the stock table.
func itemsProblems(sch orderschema.Schema, orderNo *column, live schema, byEvents bool) []Problem {
	it := sch.Items
	ic := newTableCheck(live, "items.table", it.Table)
	keyKinds := kindInteger
	if !it.ByID {
		keyKinds = nil
		if orderNo != nil {
			keyKinds = []string{family(orderNo.Type)}
		}
	}
	ic.column(need{key: "items.orderColumn", name: it.OrderColumn, kinds: keyKinds})
	sku := ic.column(need{key: "items.sku", name: it.SKU})
	ic.column(need{key: "items.quantity", name: it.Quantity, kinds: kindAmount})
	ic.leadingIndex("items.index", it.Index, []string{strings.ToLower(it.OrderColumn)}, "the close reads a page's lines by their order")
	st := sch.Stock
	if st == nil || byEvents {
		return ic.probs
	}
	sc := newTableCheck(live, "stock.table", st.Table)
	if key := sc.column(need{key: "stock.key", name: st.Key}); key != nil {
		sc.unique("stock.key", st.Key, "the close changes exactly one stock row per SKU")
		ic.sameKind(sku, "items.sku", key, st.Table, "stock.key")
		if st.Index != "" {
			sc.leadingIndex("stock.index", st.Index, []string{strings.ToLower(st.Key)}, "the close forces it to lock and change a page's stock rows by their key")
		}
	}
	for _, col := range st.Columns {
		sc.column(need{key: "stock.columns", name: col.Name, kinds: kindAmount})
	}
	return append(ic.probs, sc.probs...)
}

// couponProblems checks the coupon's columns on the order (oc, a view of
// the order table) and, unless coupons go back by events, the coupon
// table.
func couponProblems(c *orderschema.Coupon, oc *tableCheck, live schema, byEvents bool) []Problem {
	var ref *column
	if !c.ByMatch() {
		ref = oc.column(need{key: "coupon.orderColumn", name: c.OrderColumn})
	}
	for _, p := range c.Match {
		oc.column(need{key: "coupon.match", name: p.OrderColumn})
	}
	if byEvents {
		return oc.probs
	}
	cc := newTableCheck(live, "coupon.table", c.Table)
	status := cc.column(need{key: "coupon.status", name: c.Status, kinds: statusKinds(c.Used)})
	cc.enumHolds(status, statusValue{"coupon.used", c.Used}, statusValue{"coupon.unused", c.Unused})
	if !c.ByMatch() {
		if id := cc.column(need{key: "coupon.id", name: c.ID}); id != nil {
			cc.unique("coupon.id", c.ID, "the close gives back exactly one coupon row per order")
			oc.sameKind(ref, "coupon.orderColumn", id, c.Table, "coupon.id")
		}
		cc.column(need{key: "coupon.orderNo", name: c.OrderNo})
		return append(oc.probs, cc.probs...)
	}
	if c.AnyCopy && cc.column(need{key: "coupon.id", name: c.ID}) != nil {
		cc.unique("coupon.id", c.ID, "the close gives back each copy of a coupon by its id")
	}
	var cols []string
	for _, p := range c.Match {
		if cc.column(need{key: "coupon.match", name: p.Column}) != nil {
			cols = append(cols, strings.ToLower(p.Column))
		}
	}
	if cc.t != nil && len(cols) == len(c.Match) && !cc.anyOrderLeads(c.Index, cols) {
		key, name := "coupon.index", c.Index
		if name == "" {
			key, name = "coupon.match", indexName("idx_", strings.Join(cols, "_"))
		}
		cc.leadingIndex(key, name, cols, "the close finds each order's coupon row by the matched columns")
	}
	return append(oc.probs, cc.probs...)
}

// anyOrderLeads reports whether an index (the one called name, when
// named: the close forces it) starts with cols in any order (an equality
// match on each uses it whatever their order).
func (c *tableCheck) anyOrderLeads(name string, cols []string) bool {
	for _, ix := range c.t.Indexes {
		if name != "" && ix.Name != strings.ToLower(name) {
			continue
		}
		eff := c.effective(ix)
		if len(eff) >= len(cols) {
			lead := slices.Clone(eff[:len(cols)])
			want := slices.Clone(cols)
			slices.Sort(lead)
			slices.Sort(want)
			if slices.Equal(lead, want) {
				return true
			}
		}
	}
	return false
}

// givebackProblems checks one giveback: the order's amount and key
// columns (oc, a view of the order table), and the other table's column
// and unique key.
func givebackProblems(g orderschema.Giveback, oc *tableCheck, live schema) []Problem {
	oc.column(need{key: "givebacks", name: g.Amount, kinds: kindAmount})
	oc.column(need{key: "givebacks", name: g.OrderKey})
	gc := newTableCheck(live, "givebacks", g.Table)
	gc.column(need{key: "givebacks", name: g.Column, kinds: kindAmount})
	if gc.column(need{key: "givebacks", name: g.Key}) != nil {
		gc.primary("givebacks", g.Key, "the close adds each order's amount to exactly one row by primary key ("+g.String()+")")
	}
	return append(oc.probs, gc.probs...)
}
