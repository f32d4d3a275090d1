package closesql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders/orderstatus"
	"github.com/orderjob/executor/orders/schema"
)

// This file renders the close path's statements on the shop's tables from
// a schema.Schema, once, when orders builds a Closer: each page then runs the
// same few statements whatever the schema, with only its id and key lists
// filled in. The executor's own tables (close log, dead letters, cursors,
// runs) keep their constants in this package's other files.
//
// The default schema renders today's statements byte for byte
// (TestDefaultSchemaRendersTodaysStatements): names stay unquoted, as the
// plan tests and the logs have always shown them. A declared schema quotes
// every name, since a shop's may be a reserved word (`order`, `key`).
// Every name was checked to be a plain identifier and every status a plain
// literal (schema.Validate), so nothing rendered can carry other SQL.

// Statements holds the statements rendered for one schema. Statements with an
// id or key list keep a %s (or %[1]s, %[2]s) for the literal list.
type Statements struct {
	Schema schema.Schema // the schema they were rendered from

	// ScanPage reads the next keyset page of due orders of one shard,
	// after the cursor (the last row of the previous page; the first page
	// passes year 1000 and id -1), due at now.
	//
	// A plain consistent read: no row or gap locks, so concurrent runs
	// and shards never block each other here (a locking range claim
	// would: SKIP LOCKED skips the rows another shard's claim holds for a
	// moment while it walks past them, so a shard would miss some of its
	// own, and without SKIP LOCKED it would wait on them). The close
	// transaction's status CAS is the claim: it repeats the unpaid status
	// and the deadline, so what this read saw needs no second, locking
	// read. It walks the scan index (status, create time, id) from the
	// cursor over unpaid orders created at or before now, so rows already
	// passed are never read again and closed or paid orders are never read
	// at all; per index entry it checks the shard (id is the index's
	// suffix) and, with one primary-key lookup, the row's own timeout, and
	// returns the columns the close needs from that row. Not-yet-due
	// unpaid orders are the only rows read and not returned. With one
	// timeout for all orders the index range itself ends at now minus the
	// timeout, so not even those are read; with a declared due time the
	// scan walks (status, due time, id) and its range ends at now. A
	// declared soft delete (schema.SoftDelete) filters deleted rows out
	// on the row, after the primary-key lookup: the range stays the same,
	// and deleted unpaid orders in it are read by every scan. Returns up
	// to limit rows in key order.
	ScanPage string
	// LockOrders locks the given orders' rows (a literal id list) for a
	// close transaction that must read them first: a page whose status CAS
	// found an order changed since the page's read, and each order of the
	// per-order fallback. A record lock on each primary-key entry in
	// ascending id order (every close transaction locks orders in that
	// order, then stock, then coupons, then other givebacks, so two
	// closes cannot deadlock on them). One row per id that exists,
	// whatever its status: the caller skips those no longer unpaid.
	LockOrders string
	// ReadOrders is LockOrders without the locks: the payment step's
	// re-read of a page (orders' tradestep.go), by primary key.
	ReadOrders string
	// OrderByNo reads one order by its number, without locking it
	// (CloseOrder's first look). Zero or one row.
	OrderByNo string
	// OrdersForClose reads the orders CloseOrders was given, without
	// locks, with the status of each one's close dead letter: CloseOrder's
	// two first reads (OrderByNo, DeadLetterStatus) for a batch in one
	// statement. The order numbers are bound (sqlx.In). One probe of the
	// order number's unique index per number (forced on the executor's
	// own schema), then one uk_order_stage probe per order found. One row
	// per order that exists.
	OrdersForClose string
	// OrderItems reads the lines of the given orders (their numbers, or
	// ids when the lines are keyed by id, bound by sqlx.In) through the
	// item index. No locks: lines of an order never change after it is
	// placed, and the order row is locked. The index is forced: a list
	// longer than eq_range_index_dive_limit (200) is costed from the
	// index statistics alone, and statistics sampled early in a bulk load
	// (or lying engine-independent ones) make a page of 500 plan a full
	// scan of the item table (measured: 2M rows, 100-360 ms a page). The
	// order key comes back as order_no, as text.
	OrderItems string
	// CloseOrders is the status CAS of a close: unpaid and due (by the
	// run's clock, now) to closed, for a literal id list, stamping the
	// declared close time, update time and reason. The WHERE repeats the
	// unpaid status and the deadline, so an order paid or given a longer
	// timeout in between is never closed even if the Redis lock was lost:
	// the database is the fence. With a soft delete it repeats that the
	// row is live, so a delete committed before the claim wins. It locks
	// the rows it reads, in ascending
	// id order (the first of the close's locks); the caller expects
	// exactly len(ids) rows affected, and when fewer change (an order was
	// paid since it was read without a lock), rolls back and reads the
	// rows under lock first (LockOrders). The primary key is named, like
	// in every statement here that lists ids and repeats a status: when
	// few rows have that status (the last pages of a drain), the optimizer
	// would otherwise walk the status index instead.
	CloseOrders string
	// Overdue counts the unpaid orders past their deadline that the sweep
	// should have closed (at most :cap of them), and finds the earliest
	// deadline among them.
	//
	// It walks the scan index over unpaid orders created at or before now
	// from its oldest entry, at most cap entries (one primary-key lookup
	// each, for the timeout); of those it keeps the due ones whose close is
	// not held back by their dead letter (parked, or waiting for its retry
	// time: the sweep's own rule, see orders' letterFilter), which the
	// dead-letter gauges report instead. The dead letter is probed with one
	// uk_order_stage lookup per order (eq_ref): a LEFT JOIN, not NOT
	// EXISTS, which MariaDB runs by materialising the whole dead-letter
	// table, where resolved letters pile up. Unpaid orders are walked oldest
	// first, so the due ones come first: the count is exact up to cap and
	// stays at cap beyond it, and the cost is bounded however large the
	// backlog. Soft-deleted orders are filtered out before the cap: never
	// counted, but walked like the scan walks them. No locks.
	Overdue string

	Stock  *Stock     // nil without a stock table
	Coupon *Coupon    // nil without a coupon table
	Extra  *Givebacks // nil without other givebacks

	ItemsByID bool   // lines name the order's id, not its number
	OrderGone string // the dead-letter reason of an order no longer there
}

// Stock gives the page's summed quantities back to the stock rows.
type Stock struct {
	Key string // the key column as the statements name it
	// Lock locks the stock rows of a literal key list before they are
	// changed: record locks on the key in ascending key order (InnoDB
	// walks an IN list on the key in key order), the order every
	// transaction of this package takes stock locks in, so hot SKUs shared
	// by many orders never deadlock. It returns the key and every changed
	// column of the rows that exist; a missing SKU is an error for the
	// orders that have it.
	Lock string
	// Release changes every declared column by the summed quantity of the
	// page's lines of each key, in one statement: %[1]s is a CASE giving
	// each key its quantity (see orders' deltaCase), %[2]s the key list; both
	// literal. The rows are already locked (ascending key) by lock, or are
	// locked here in the same order, and each subtracted column repeats
	// the pre-check (column >= delta), so it can never go negative: a row
	// that fails it is not updated and the caller, expecting one row per
	// key, rolls back.
	Release  string
	Subtract []int // indexes of the columns that are subtracted (checked by orders' validate)
}

// Coupon gives the page's coupons back.
type Coupon struct {
	ByMatch bool // found by matching columns, not by id
	// Optional (by match): an order matching no used row has no coupon.
	Optional bool
	// AnyCopy (by match): the used rows matching an order are copies of
	// one coupon; the caller gives each order one of them (see Lock).
	AnyCopy bool
	// Lock locks the coupons of the orders being closed, after the stock
	// locks. By id: the rows of a literal coupon id list, in ascending
	// id order, with their status and the order using them. By match: the
	// used rows matching each order of a literal order id list, one row
	// per match, named by the order's id; with AnyCopy also by the copy's
	// own id (copy_id), by order id (the caller orders each order's
	// copies: sorting them here would sort the page in a temporary table).
	Lock string
	// Restore sets the coupons back to unused. By id: the rows of a
	// literal id list still used, clearing the order; when the coupon
	// names its order, only a row naming the very order that holds it:
	// :coupon_ids and :order_nos bind each order's coupon and number, in
	// the same order. By match: the
	// used rows matching the orders of a literal id list; with AnyCopy,
	// the copies of a literal copy id list still used. The caller expects
	// one row per coupon (per order with a coupon, by match and when the
	// coupon names its order) and checked each under lock in validation.
	Restore string
	Used    string // the used status as text, as Lock returns it
	OrderNo bool   // the coupon names the order using it
	Table   string // the coupon table's name, as a dead letter's reason names it
}

// Givebacks gives back the per-order amounts of schema.Schema.Extra.
type Givebacks struct {
	// Read reads, for a literal list of orders whose status CAS this
	// transaction has just made (so their rows are locked), each
	// giveback's amount and key: id, then amount and key per giveback.
	Read string
	// Add adds the summed amounts to each giveback's rows, one statement
	// per giveback: %[1]s a CASE of each key's sum, %[2]s the key list.
	// One row per key is expected.
	Add []string
	Key []string // each giveback's key column as Add names it
}

// Default is the executor's own schema rendered: what a Closer without a
// declared schema runs, and what the order service's shared statements
// (items, stock locks) use.
var Default = mustRender(schema.Default())

func mustRender(s schema.Schema) *Statements {
	c, err := Render(s)
	if err != nil {
		panic(err)
	}
	return c
}

// Render renders s's statements, after checking it.
func Render(s schema.Schema) (*Statements, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("order schema: %w", err)
	}
	r := renderer{s: s}
	c := &Statements{Schema: s, ItemsByID: s.Items.ByID, OrderGone: "order not found in " + s.Orders.Table}
	c.ScanPage = r.scanPage()
	c.LockOrders = "\nSELECT " + r.orderCols("") + "\nFROM " + r.n(s.Orders.Table) + " WHERE " + r.n(s.Orders.ID) +
		" IN (%s) ORDER BY " + r.n(s.Orders.ID) + " FOR UPDATE"
	c.ReadOrders = "\nSELECT " + r.orderCols("") + "\nFROM " + r.n(s.Orders.Table) + " WHERE " + r.n(s.Orders.ID) + " IN (%s)"
	c.OrderByNo = "\nSELECT " + r.orderCols("") + "\nFROM " + r.n(s.Orders.Table) + " WHERE " + r.n(s.Orders.OrderNo) + " = ?"
	c.OrdersForClose = r.ordersForClose()
	c.OrderItems = "SELECT " + r.sel("", s.Items.OrderColumn, "order_no") + ", " + r.sel("", s.Items.SKU, "sku_id") + ", " +
		r.sel("", s.Items.Quantity, "quantity") + " FROM " + r.n(s.Items.Table) + " FORCE INDEX (" + r.n(s.Items.Index) +
		") WHERE " + r.n(s.Items.OrderColumn) + " IN (?)"
	c.CloseOrders = r.closeOrders()
	c.Overdue = r.overdue()
	if s.Stock != nil {
		c.Stock = r.stock()
	}
	if s.Coupon != nil {
		c.Coupon = r.coupon()
	}
	if len(s.Extra) > 0 {
		c.Extra = r.givebacks()
	}
	return c, nil
}

// renderer renders names and columns of one schema.
type renderer struct{ s schema.Schema }

// n is a table, column or index name as the statements write it.
func (r renderer) n(name string) string {
	if r.s.Declared {
		return schema.Quote(name)
	}
	return name
}

// sel selects column name of the table aliased prefix ("" or "o.") as alias.
func (r renderer) sel(prefix, name, alias string) string {
	if !r.s.Declared && name == alias {
		return prefix + name
	}
	return prefix + r.n(name) + " AS " + alias
}

// orderCols are the columns the close reads of an order, as orders' orderRow's
// fields. A declared schema's status comes back as the executor's own
// status values (orderstatus), so the Go side needs no second vocabulary:
// unpaid, closed, and any other value counted as paid (the order moved on).
func (r renderer) orderCols(p string) string {
	o := r.s.Orders
	status := p + "status"
	if r.s.Declared {
		unpaid := strconv.Itoa(orderstatus.Unpaid)
		if live := r.live(p); live != "" {
			// A soft-deleted unpaid order reads as closed: every close
			// path then skips it as an order someone else closed, and a
			// dead letter of it is resolved, never replayed into a close.
			unpaid = fmt.Sprintf("IF(%s, %d, %d)", live, orderstatus.Unpaid, orderstatus.Closed)
		}
		status = fmt.Sprintf("CASE %s%s WHEN %s THEN %s WHEN %s THEN %d ELSE %d END AS status", p, r.n(o.Status),
			o.Unpaid.SQL(), unpaid, o.Closed.SQL(), orderstatus.Closed, orderstatus.Paid)
	}
	return strings.Join([]string{r.sel(p, o.ID, "id"), r.sel(p, o.OrderNo, "order_no"), status,
		r.timeCol(p), r.timeoutCol(p), r.couponCol(p)}, ", ")
}

// live is the condition that the order of the table aliased p ("" or
// "o.") is not soft-deleted, "" when the schema has no soft delete. A
// NULL in a column whose live value is a value is not live: the status
// CAS, which repeats this condition, would not close it either.
func (r renderer) live(p string) string {
	d := r.s.Orders.SoftDelete
	switch {
	case !d.Declared():
		return ""
	case d.Live.IsZero():
		return p + r.n(d.Column) + " IS NULL"
	}
	return p + r.n(d.Column) + " = " + d.Live.SQL()
}

// andLive is " AND " and live(p), or "" without soft delete.
func (r renderer) andLive(p string) string {
	if l := r.live(p); l != "" {
		return " AND " + l
	}
	return ""
}

// scanCols are orderCols without the status (a scan reads only unpaid ones).
func (r renderer) scanCols(p string) string {
	o := r.s.Orders
	return strings.Join([]string{r.sel(p, o.ID, "id"), r.sel(p, o.OrderNo, "order_no"),
		r.timeCol(p), r.timeoutCol(p), r.couponCol(p)}, ", ")
}

// timeCol is the order's create time, as create_time. A declared
// dueTime comes back there instead, with a timeout of 0 (timeoutCol), so
// that everything reading a row (the cursor, the deadline create_time +
// timeout_minutes, the order view's due card) works on the deadline
// unchanged: the scan's keyset, the lock and the close's guard all walk
// (status, dueTime, id) as they otherwise walk (status, createTime, id).
// A NULL deadline, never due (no comparison with it holds), comes back
// as 9999-12-31, so that a read by id or number (CloseOrder, the order
// view) still scans it into a time and finds it not due. An epoch time
// comes back as the UTC date-time of its instant (see timeOut).
func (r renderer) timeCol(p string) string {
	if o := r.s.Orders; o.DueTime != "" {
		return "COALESCE(" + r.timeOut(p+r.n(o.DueTime)) + ", " + neverDue + ") AS create_time"
	}
	if r.s.Orders.TimeUnit.Epoch() {
		return r.timeOut(p+r.n(r.s.Orders.CreateTime)) + " AS create_time"
	}
	return r.sel(p, r.s.Orders.CreateTime, "create_time")
}

// timeOut is the time expr holds as a date-time: expr itself, or for an
// epoch unit the UTC date-time of its instant, by plain arithmetic from
// 1970-01-01 (no time zone takes part, so every instant maps to one value,
// exactly, and comes back to Go as that instant, the DSN's loc being UTC).
// Only ever in a select list: the scan's WHERE and ORDER BY compare the
// shop's column itself, with parameters converted in Go (NowEpoch, ...).
func (r renderer) timeOut(expr string) string {
	switch r.s.Orders.TimeUnit {
	case schema.EpochSeconds:
		return "(CAST('1970-01-01' AS DATETIME) + INTERVAL " + expr + " SECOND)"
	case schema.EpochMillis:
		return "(CAST('1970-01-01' AS DATETIME(3)) + INTERVAL " + expr + " * 1000 MICROSECOND)"
	}
	return expr
}

// neverDue is the deadline a NULL dueTime reads as: typed, so that the
// row's create_time stays a date-time, and without a ':', which named
// statements would take for a parameter.
const neverDue = "CAST('9999-12-31' AS DATETIME)"

// Epoch parameters: the statements of an epoch schema compare the shop's
// integer columns with these, which the Go side computes from the run's
// instants (schema.TimeUnit.Of), in place of :now, :after_time and
// :close_time.
const (
	NowEpoch   = "now_epoch"
	AfterEpoch = "after_epoch"
	CloseEpoch = "close_epoch"
)

// param is the time parameter name a shop's time column is compared
// with or set to: :name, or :epoch (its value in the unit) for an epoch
// unit.
func (r renderer) param(name, epoch string) string {
	if r.s.Orders.TimeUnit.Epoch() {
		return ":" + epoch
	}
	return ":" + name
}

// now is the parameter a shop's time column is compared with: :now, or
// :now_epoch for an epoch unit.
func (r renderer) now() string { return r.param("now", NowEpoch) }

// minutes is m minutes in the schema's unit, to add to a time column:
// INTERVAL m MINUTE, or a product for an epoch unit.
func (r renderer) minutes(m string) string {
	if u := r.s.Orders.TimeUnit; u.Epoch() {
		return m + " * " + strconv.FormatInt(60*u.PerSecond(), 10)
	}
	return "INTERVAL " + m + " MINUTE"
}

// timeoutCol is the order's timeout in minutes, as timeout_minutes.
func (r renderer) timeoutCol(p string) string {
	if o := r.s.Orders; o.TimeoutColumn == "" {
		return strconv.Itoa(o.TimeoutMinutes) + " AS timeout_minutes"
	}
	return r.sel(p, r.s.Orders.TimeoutColumn, "timeout_minutes")
}

// timeout is the order's timeout in minutes as an INTERVAL operand.
func (r renderer) timeout(p string) string {
	if o := r.s.Orders; o.TimeoutColumn == "" {
		return strconv.Itoa(o.TimeoutMinutes)
	}
	return p + r.n(r.s.Orders.TimeoutColumn)
}

// due is when the order of the table aliased p ("" or "o.") falls due:
// its create time plus its timeout, or its declared deadline itself (an
// integer in the schema's unit for an epoch unit).
func (r renderer) due(p string) string {
	if o := r.s.Orders; o.DueTime != "" {
		return p + r.n(o.DueTime)
	}
	return p + r.n(r.s.Orders.CreateTime) + " + " + r.minutes(r.timeout(p))
}

// couponCol is what the close knows of the order's coupon, as coupon_id:
// the coupon row's id, or, with a matched coupon, the order's own id when
// every matched column is set (NULL: no coupon; the close then asks the
// coupon table for the rows matching that order).
func (r renderer) couponCol(p string) string {
	c := r.s.Coupon
	switch {
	case c == nil:
		return "NULL AS coupon_id"
	case c.ByMatch():
		var set []string
		for _, m := range c.Match {
			set = append(set, p+r.n(m.OrderColumn)+" IS NULL")
		}
		return "IF(" + strings.Join(set, " OR ") + ", NULL, " + p + r.n(r.s.Orders.ID) + ") AS coupon_id"
	}
	return r.sel(p, c.OrderColumn, "coupon_id")
}

func (r renderer) scanPage() string {
	o := r.s.Orders
	col := func(name string) string { return "o." + r.n(name) }
	at, now, after := col(o.ScanTime()), r.now(), r.param("after_time", AfterEpoch)
	var due string
	switch {
	case o.DueTime != "": // the index range ends at now
		due = "  AND " + at + " <= " + now + "\n"
	case o.TimeoutColumn == "" && o.TimeUnit.Epoch(): // as below, the timeout in the unit
		due = "  AND " + at + " <= " + now + " - " + strconv.FormatInt(int64(o.TimeoutMinutes)*60*o.TimeUnit.PerSecond(), 10) + "\n"
	case o.TimeoutColumn == "": // the index range ends at now minus the one timeout
		due = "  AND " + at + " <= :now - INTERVAL " + strconv.Itoa(o.TimeoutMinutes) + " MINUTE\n"
	default:
		due = "  AND " + at + " <= " + now + "\n  AND " + r.due("o.") + " <= " + now + "\n"
	}
	return "\nSELECT " + r.scanCols("o.") + "\nFROM " + r.n(o.Table) + " o FORCE INDEX (" + r.n(o.ScanIndex) + ")\n" +
		"WHERE " + col(o.Status) + " = " + o.Unpaid.SQL() + "\n" +
		"  AND (" + at + " > " + after + " OR (" + at + " = " + after + " AND " + col(o.ID) + " > :after_id))\n" +
		due +
		"  AND " + shard.Match(col(o.ID)) + r.andLive("o.") + "\n" +
		"ORDER BY " + at + ", " + col(o.ID) + "\nLIMIT :limit"
}

func (r renderer) ordersForClose() string {
	o := r.s.Orders
	hint := " FORCE INDEX (uk_order_no)"
	if r.s.Declared {
		// The shop's unique index on its order number has a name we do not
		// know; a unique key is costed as one row per value whatever the
		// statistics say (the declared plan test holds it).
		hint = ""
	}
	return "\nSELECT " + r.orderCols("o.") + ",\n       COALESCE(d.status, '') AS letter_status\n" +
		"FROM " + r.n(o.Table) + " o" + hint + "\n" +
		"LEFT JOIN order_dead_letter d FORCE INDEX (uk_order_stage) ON d.order_no = o." + r.n(o.OrderNo) + " AND d.stage = 'close'\n" +
		"WHERE o." + r.n(o.OrderNo) + " IN (?)"
}

func (r renderer) closeOrders() string {
	o := r.s.Orders
	set := []string{r.n(o.Status) + " = " + o.Closed.SQL()}
	stamp := r.param("close_time", CloseEpoch)
	if o.CloseTime != "" {
		set = append(set, r.n(o.CloseTime)+" = "+stamp)
	}
	if o.UpdateTime != "" {
		set = append(set, r.n(o.UpdateTime)+" = "+stamp)
	}
	if o.CloseReason != "" {
		set = append(set, r.n(o.CloseReason)+" = :close_reason")
	}
	return "\nUPDATE " + r.n(o.Table) + " FORCE INDEX (PRIMARY) SET " + strings.Join(set, ", ") + "\n" +
		"WHERE " + r.n(o.ID) + " IN (%s) AND " + r.n(o.Status) + " = " + o.Unpaid.SQL() + " AND " + r.due("") + " <= " + r.now() + r.andLive("")
}

func (r renderer) overdue() string {
	o := r.s.Orders
	col := func(name string) string { return "o." + r.n(name) }
	return "\nSELECT COUNT(*) AS n, " + r.timeOut("MIN(t.deadline)") + " AS oldest\nFROM (\n" +
		"  SELECT " + r.sel("o.", o.OrderNo, "order_no") + ", " + r.due("o.") + " AS deadline\n" +
		"  FROM " + r.n(o.Table) + " o FORCE INDEX (" + r.n(o.ScanIndex) + ")\n" +
		"  WHERE " + col(o.Status) + " = " + o.Unpaid.SQL() + " AND " + col(o.ScanTime()) + " <= " + r.now() + r.andLive("o.") + "\n" +
		"  ORDER BY " + col(o.ScanTime()) + ", " + col(o.ID) + "\n  LIMIT :cap\n) t\n" +
		"LEFT JOIN order_dead_letter d FORCE INDEX (uk_order_stage)\n" +
		"  ON d.order_no = t.order_no AND d.stage = 'close'\n" +
		" AND (d.status = 'parked' OR (d.status = 'waiting' AND d.next_retry_at > :now))\n" +
		"WHERE t.deadline <= " + r.now() + " AND d.id IS NULL"
}

func (r renderer) stock() *Stock {
	st := r.s.Stock
	key := r.n(st.Key)
	hint := ""
	if r.s.Declared && st.Index != "" {
		// The executor's own inventory keeps today's unhinted statements
		// (its plan tests hold PRIMARY); a shop's stock table may be small,
		// where a page's key list plans a full scan that locks every row.
		hint = " FORCE INDEX (" + r.n(st.Index) + ")"
	}
	out := &Stock{Key: key}
	cols := []string{r.sel("", st.Key, "sku_id")}
	var set, guard []string
	for i, c := range st.Columns {
		cols = append(cols, r.n(c.Name))
		op := " + "
		if c.Subtract {
			op = " - "
			guard = append(guard, " AND "+r.n(c.Name)+" >= %[1]s")
			out.Subtract = append(out.Subtract, i)
		}
		set = append(set, r.n(c.Name)+" = "+r.n(c.Name)+op+"%[1]s")
	}
	out.Lock = "\nSELECT " + strings.Join(cols, ", ") + " FROM " + r.n(st.Table) + hint + "\n" +
		"WHERE " + key + " IN (%s) ORDER BY " + key + " FOR UPDATE"
	out.Release = "\nUPDATE " + r.n(st.Table) + hint + "\nSET " + strings.Join(set, ", ") + "\n" +
		"WHERE " + key + " IN (%[2]s)" + strings.Join(guard, "")
	return out
}

func (r renderer) coupon() *Coupon {
	c, o := r.s.Coupon, r.s.Orders
	out := &Coupon{ByMatch: c.ByMatch(), Optional: c.Optional, AnyCopy: c.AnyCopy, Used: c.Used.String(), OrderNo: c.OrderNo != "", Table: c.Table}
	if c.AnyCopy {
		return r.couponCopies(out)
	}
	if c.ByMatch() {
		join := r.couponJoin()
		where := "WHERE o." + r.n(o.ID) + " IN (%s) AND h." + r.n(c.Status) + " = " + c.Used.SQL()
		out.Lock = "\nSELECT o." + r.n(o.ID) + " AS id FROM " + join + "\n" + where + " ORDER BY o." + r.n(o.ID) + " FOR UPDATE"
		out.Restore = "\nUPDATE " + join + " SET h." + r.n(c.Status) + " = " + c.Unused.SQL() + "\n" + where
		return out
	}
	id, st := r.n(c.ID), r.n(c.Status)
	orderNo, set, check := "NULL AS order_no", st+" = "+c.Unused.SQL(), ""
	if out.OrderNo {
		orderNo = r.sel("", c.OrderNo, "order_no")
		set += ", " + r.n(c.OrderNo) + " = NULL"
		// Pairs, not two lists: a coupon naming another order of the
		// page must not count for this one. FIELD finds the row's id
		// among the orders' coupons (as numbers) and ELT takes the order
		// of that place: a row constructor's IN would need a placeholder
		// pair per order, and a text key of id and order misses a
		// ZEROFILL id, which CONCAT pads.
		check = " AND " + r.n(c.OrderNo) + " = ELT(FIELD(" + id + ", :coupon_ids), :order_nos)"
	}
	out.Lock = "\nSELECT " + r.sel("", c.ID, "id") + ", " + r.sel("", c.Status, "status") + ", " + orderNo + " FROM " + r.n(c.Table) + "\n" +
		"WHERE " + id + " IN (%s) ORDER BY " + id + " FOR UPDATE"
	out.Restore = "\nUPDATE " + r.n(c.Table) + " SET " + set + "\n" +
		"WHERE " + id + " IN (%s) AND " + st + " = " + c.Used.SQL() + check
	return out
}

// couponCopies fills out's statements for coupons matched by columns whose
// used rows are copies (schema.Coupon.AnyCopy): Lock returns every used
// copy matching each order with the copy's id, and Restore gives back the
// copies the caller chose, by their ids.
func (r renderer) couponCopies(out *Coupon) *Coupon {
	c, o := r.s.Coupon, r.s.Orders
	oid, hid := "o."+r.n(o.ID), "h."+r.n(c.ID)
	out.Lock = "\nSELECT " + oid + " AS id, " + hid + " AS copy_id FROM " + r.couponJoin() + "\n" +
		"WHERE " + oid + " IN (%s) AND h." + r.n(c.Status) + " = " + c.Used.SQL() + " ORDER BY " + oid + " FOR UPDATE"
	out.Restore = "\nUPDATE " + r.n(c.Table) + " SET " + r.n(c.Status) + " = " + c.Unused.SQL() + "\n" +
		"WHERE " + r.n(c.ID) + " IN (%s) AND " + r.n(c.Status) + " = " + c.Used.SQL()
	return out
}

// couponJoin joins the order (o) to its matched coupon rows (h).
func (r renderer) couponJoin() string {
	c := r.s.Coupon
	var on []string
	for _, m := range c.Match {
		on = append(on, "h."+r.n(m.Column)+" = o."+r.n(m.OrderColumn))
	}
	hint := ""
	if c.Index != "" {
		hint = " FORCE INDEX (" + r.n(c.Index) + ")"
	}
	return r.n(r.s.Orders.Table) + " o FORCE INDEX (PRIMARY) JOIN " + r.n(c.Table) + " h" + hint + " ON " + strings.Join(on, " AND ")
}

func (r renderer) givebacks() *Givebacks {
	o := r.s.Orders
	out := &Givebacks{}
	cols := []string{r.n(o.ID)}
	for _, g := range r.s.Extra {
		cols = append(cols, r.n(g.Amount), r.n(g.OrderKey))
		out.Key = append(out.Key, r.n(g.Key))
		// The key is the table's primary key: forced, since a page's key
		// list on a small member table otherwise plans a full index scan.
		out.Add = append(out.Add, "\nUPDATE "+r.n(g.Table)+" FORCE INDEX (PRIMARY) SET "+r.n(g.Column)+" = "+r.n(g.Column)+" + %[1]s\n"+
			"WHERE "+r.n(g.Key)+" IN (%[2]s)")
	}
	out.Read = "\nSELECT " + strings.Join(cols, ", ") + " FROM " + r.n(o.Table) + " FORCE INDEX (PRIMARY) WHERE " + r.n(o.ID) + " IN (%s)"
	return out
}
