// Package schema describes where a shop keeps its orders: the order table
// and its columns, the status values, where each order's timeout comes
// from, the item table, and what a close gives back (stock, a coupon,
// other per-order amounts such as loyalty points). The close path renders
// its statements from a Schema; Default is the executor's own schema
// (order_info and its neighbours, created by executor migrate), so a
// deployment that declares nothing sees no change.
//
// Every name is checked to be a plain identifier and every value a plain
// literal before any statement is rendered: a Schema comes from the
// operator's configuration, and its names end up inside SQL text.
package schema

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Schema is a shop's order data, as the close path reads and changes it.
type Schema struct {
	// Declared is true when the operator named the shop's own tables:
	// executor migrate then never creates or alters them, and the
	// start-up check verifies them instead.
	Declared bool
	Orders   Orders
	Items    Items
	Stock    *Stock     // nil: a close gives no stock back
	Coupon   *Coupon    // nil: orders carry no coupon
	Extra    []Giveback // other per-order amounts given back (points, ...)
}

// Orders is the order table.
type Orders struct {
	Table      string
	ScanIndex  string // index led by (Status, ScanTime()) the scan walks
	ID         string // numeric primary key
	OrderNo    string // the order's number (unique; any type, read as text)
	User       string // the buyer (optional unless a coupon match or giveback names it)
	Status     string
	CreateTime string
	Unpaid     Value // status of an order waiting for payment
	Closed     Value // status a close sets
	// TimeoutColumn holds each order's timeout in minutes; when empty,
	// every order times out TimeoutMinutes after CreateTime.
	TimeoutColumn  string
	TimeoutMinutes int
	// DueTime holds each order's payment deadline itself: set, an order
	// is due when it has passed, and CreateTime, TimeoutColumn and
	// TimeoutMinutes are not given.
	DueTime string
	// Optional columns a close stamps: the close time and the update
	// time (both the run's close time) and the close reason.
	CloseTime   string
	UpdateTime  string
	CloseReason string
	// TimeUnit is how every time column named above holds its times:
	// DATETIME or TIMESTAMP values (the zero value), or integer Unix
	// epoch seconds or milliseconds.
	TimeUnit TimeUnit
	// SoftDelete is how the shop marks an order deleted while keeping
	// its row; the zero value: it never does.
	SoftDelete SoftDelete
}

// SoftDelete is a column marking an order deleted without removing its
// row (macrozheng mall's delete_status, RuoYi's del_flag, is_deleted,
// deleted_at). A deleted order is never closed: the shop may have given
// back its stock and coupon when deleting it, and a close would give
// them back again.
type SoftDelete struct {
	Column string // empty: no soft delete
	// Live is the column's value on a row that is not deleted; the zero
	// value means NULL is (deleted_at, set when the row is deleted).
	Live Value
}

// Declared reports whether the schema names a soft-delete column.
func (d SoftDelete) Declared() bool { return d.Column != "" }

// TimeUnit is how an order table holds its times.
type TimeUnit int

// The time units, as order.schema.timeUnit names them.
const (
	// DateTime: DATETIME or TIMESTAMP values, wall clocks of the session
	// time zone.
	DateTime TimeUnit = iota
	// EpochSeconds: integer seconds since 1970-01-01 00:00:00 UTC.
	EpochSeconds
	// EpochMillis: integer milliseconds since 1970-01-01 00:00:00 UTC.
	EpochMillis
)

// TimeUnits are the units' names, in order.
var TimeUnits = []string{"datetime", "epochSeconds", "epochMillis"}

// ParseTimeUnit reads a unit by its name (TimeUnits).
func ParseTimeUnit(s string) (TimeUnit, bool) {
	for i, n := range TimeUnits {
		if s == n {
			return TimeUnit(i), true
		}
	}
	return DateTime, false
}

// String is the unit's name.
func (u TimeUnit) String() string {
	if u < 0 || int(u) >= len(TimeUnits) {
		return fmt.Sprintf("TimeUnit(%d)", int(u))
	}
	return TimeUnits[u]
}

// Epoch reports whether times are integers since the Unix epoch.
func (u TimeUnit) Epoch() bool { return u == EpochSeconds || u == EpochMillis }

// PerSecond is how many units make a second (1 or 1000; 0 for DateTime).
func (u TimeUnit) PerSecond() int64 {
	switch u {
	case EpochSeconds:
		return 1
	case EpochMillis:
		return 1000
	}
	return 0
}

// Of is the instant t in the unit: whole seconds or milliseconds since
// the epoch, rounded down (an integer column holds a time at or before
// t exactly when it holds at most Of(t)). 0 for DateTime.
func (u TimeUnit) Of(t time.Time) int64 {
	switch u {
	case EpochSeconds:
		return t.Unix()
	case EpochMillis:
		return t.UnixMilli()
	}
	return 0
}

// Items is the order-line table.
type Items struct {
	Table string
	Index string // index on OrderColumn, forced by the line read
	// ByID says OrderColumn holds the order's ID; otherwise its OrderNo.
	ByID        bool
	OrderColumn string
	SKU         string
	Quantity    string
}

// Stock is the stock table and how a close changes it: for each column,
// add or subtract the summed quantity of the page's lines of each key.
type Stock struct {
	Table string
	Key   string // primary or unique key matching Items.SKU
	// Index is Key's index (PRIMARY for the primary key), forced by a
	// declared schema's stock statements: on a small stock table a page's
	// key list would otherwise plan a full scan, locking rows checkout needs.
	Index   string
	Columns []StockColumn
}

// StockColumn is one stock column a close changes by the lines' quantity.
type StockColumn struct {
	Name     string
	Subtract bool // subtract (never below zero); otherwise add
}

// Coupon is how a close gives an order's coupon back: the coupon row, in
// state Used, goes back to Unused. Exactly one row per order with a coupon.
type Coupon struct {
	Table  string
	Status string
	Used   Value
	Unused Value
	// By id: OrderColumn of the order holds ID of the coupon row, and
	// OrderNo (optional) names the coupon column holding the order number
	// it is used by (checked, then cleared).
	OrderColumn string
	ID          string
	OrderNo     string
	// By match (Match not empty): the coupon row whose columns equal the
	// order's columns (e.g. user_id = user_id, coupon_id = coupon_id).
	// An order with a NULL in any matched order column has no coupon.
	Match []Pair
	// Optional (with Match): an order that matches no used row has no
	// coupon and closes, instead of going to a dead letter. For a shop
	// whose coupon row names the order (litemall's coupon_user.order_id)
	// while the order does not say whether it used one.
	Optional bool
	// AnyCopy (with Match): the used rows matching an order are copies of
	// one coupon, any of which the order may hold (macrozheng/mall marks
	// the first unused row of member and coupon used, and gives back the
	// first used one). Orders of one match key get distinct rows, lowest
	// row ID first to the lowest order id; an order left without one
	// matches none. ID names the rows.
	AnyCopy bool
	// Index is the coupon table's index on the Match columns, forced by
	// the matched lookup when set (statistics that lie make the join scan
	// the coupon table otherwise).
	Index string
}

// ByMatch reports whether the coupon is found by matching columns.
func (c *Coupon) ByMatch() bool { return len(c.Match) > 0 }

// Pair is a column of another table equal to a column of the order.
type Pair struct {
	Column      string // of the other table
	OrderColumn string
}

// Giveback adds an amount kept on the order to a row of another table:
// Table.Column += order.Amount where Table.Key = order.OrderKey. Orders
// whose amount is NULL or 0 give nothing back.
type Giveback struct {
	Table    string
	Column   string
	Amount   string // column of the order
	Key      string // primary key of Table (the statement forces PRIMARY)
	OrderKey string // column of the order
}

// ScanTime is the time column the scan walks after the status: DueTime
// when the order table holds each order's deadline, else CreateTime.
func (o Orders) ScanTime() string {
	if o.DueTime != "" {
		return o.DueTime
	}
	return o.CreateTime
}

// String is the giveback as it is written in the configuration.
func (g Giveback) String() string {
	return fmt.Sprintf("%s.%s += %s by %s.%s = %s", g.Table, g.Column, g.Amount, g.Table, g.Key, g.OrderKey)
}

// Default is the executor's own schema (sql/migrations).
func Default() Schema {
	return Schema{
		Orders: Orders{Table: "order_info", ScanIndex: "idx_status_create_time", ID: "id", OrderNo: "order_no",
			User: "user_id", Status: "status", CreateTime: "create_time", Unpaid: Int(0), Closed: Int(2),
			TimeoutColumn: "timeout_minutes", CloseTime: "close_time", CloseReason: "close_reason"},
		Items: Items{Table: "order_item", Index: "idx_order_no", OrderColumn: "order_no", SKU: "sku_id", Quantity: "quantity"},
		Stock: &Stock{Table: "inventory", Key: "sku_id", Index: "PRIMARY",
			Columns: []StockColumn{{Name: "available"}, {Name: "locked", Subtract: true}}},
		Coupon: &Coupon{Table: "user_coupon", Status: "status", Used: Int(1), Unused: Int(0),
			OrderColumn: "coupon_id", ID: "id", OrderNo: "order_no"},
	}
}

// Value is a status value: an integer or a short text, checked to be a
// plain literal.
type Value struct {
	text  string
	isInt bool
}

// Int is an integer status value.
func Int(n int64) Value { return Value{text: strconv.FormatInt(n, 10), isInt: true} }

// literalText is what a text status value may hold.
var literalText = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_ .-]{0,31}$`)

// ParseValue reads a status value as written in the configuration: an
// integer, or a text of letters, digits, '_', ' ', '.' and '-' (at most
// 32), optionally in single quotes (to keep '01' a text).
func ParseValue(s string) (Value, error) {
	s = strings.TrimSpace(s)
	if q, ok := strings.CutPrefix(s, "'"); ok {
		if t, ok := strings.CutSuffix(q, "'"); ok && literalText.MatchString(t) {
			return Value{text: t}, nil
		}
		return Value{}, fmt.Errorf("status value %q: a quoted value holds letters, digits, '_', ' ', '.' or '-' (at most 32)", s)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Int(n), nil
	}
	if !literalText.MatchString(s) {
		return Value{}, fmt.Errorf("status value %q: give an integer or a text of letters, digits, '_', ' ', '.' or '-' (at most 32)", s)
	}
	return Value{text: s}, nil
}

// SQL is the value as a SQL literal.
func (v Value) SQL() string {
	if v.isInt {
		return v.text
	}
	return "'" + v.text + "'"
}

// String is the value as written in the configuration.
func (v Value) String() string { return v.text }

// IsZero reports whether v was never set.
func (v Value) IsZero() bool { return v.text == "" }

// identifier is what a table, column or index name may be: unquoted
// MySQL identifiers (no backticks, no schema prefix).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)

// Quote renders a checked name as a quoted identifier.
func Quote(name string) string { return "`" + name + "`" }

// ParseStockColumn reads "column += quantity" or "column -= quantity".
func ParseStockColumn(s string) (StockColumn, error) {
	f := strings.Fields(s)
	if len(f) != 3 || (f[1] != "+=" && f[1] != "-=") || f[2] != "quantity" {
		return StockColumn{}, fmt.Errorf("stock column %q: write 'column += quantity' or 'column -= quantity'", s)
	}
	return StockColumn{Name: f[0], Subtract: f[1] == "-="}, nil
}

// ParsePair reads "column = orderColumn".
func ParsePair(s string) (Pair, error) {
	a, b, ok := strings.Cut(s, "=")
	if !ok {
		return Pair{}, fmt.Errorf("match %q: write 'column = orderColumn'", s)
	}
	return Pair{Column: strings.TrimSpace(a), OrderColumn: strings.TrimSpace(b)}, nil
}

// givebackForm is "table.column += amount by table.key = orderKey".
var givebackForm = regexp.MustCompile(`^\s*(\w+)\.(\w+)\s*\+=\s*(\w+)\s+by\s+(\w+)\.(\w+)\s*=\s*(\w+)\s*$`)

// ParseGiveback reads "table.column += amount by table.key = orderKey",
// e.g. "member.points += used_points by member.id = user_id".
func ParseGiveback(s string) (Giveback, error) {
	m := givebackForm.FindStringSubmatch(s)
	if m == nil || m[1] != m[4] {
		return Giveback{}, fmt.Errorf("giveback %q: write 'table.column += orderColumn by table.key = orderColumn', e.g. 'member.points += used_points by member.id = user_id'", s)
	}
	return Giveback{Table: m[1], Column: m[2], Amount: m[3], Key: m[5], OrderKey: m[6]}, nil
}

// Validate reports every problem of s at once: names that are not plain
// identifiers, missing required names and values, and combinations the
// close cannot run.
func (s Schema) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	name := func(key, v string, required bool) {
		switch {
		case v == "" && required:
			bad("%s: required", key)
		case v != "" && !identifier.MatchString(v):
			bad("%s: %q is not a plain table or column name (letters, digits, '_', '$'; at most 64)", key, v)
		}
	}
	o := s.Orders
	for _, f := range []struct {
		key, v string
		req    bool
	}{{"table", o.Table, true}, {"scanIndex", o.ScanIndex, true}, {"id", o.ID, true}, {"orderNo", o.OrderNo, true},
		{"user", o.User, false}, {"status", o.Status, true}, {"createTime", o.CreateTime, o.DueTime == ""},
		{"timeoutColumn", o.TimeoutColumn, false}, {"dueTime", o.DueTime, false}, {"closeTime", o.CloseTime, false},
		{"updateTime", o.UpdateTime, false}, {"closeReason", o.CloseReason, false},
		{"softDelete.column", o.SoftDelete.Column, false}} {
		name(f.key, f.v, f.req)
	}
	if !o.SoftDelete.Declared() && !o.SoftDelete.Live.IsZero() {
		bad("softDelete.liveValue: %q given without softDelete.column; name the column it is the value of", o.SoftDelete.Live)
	}
	if o.TimeUnit != DateTime && !o.TimeUnit.Epoch() {
		bad("timeUnit: %s is not one of %s", o.TimeUnit, strings.Join(TimeUnits, ", "))
	}
	if o.Unpaid.IsZero() || o.Closed.IsZero() {
		bad("unpaid, closed: both status values are required")
	} else if o.Unpaid == o.Closed {
		bad("unpaid, closed: the same value %q", o.Unpaid)
	}
	switch {
	case o.DueTime != "":
		if o.CreateTime != "" || o.TimeoutColumn != "" || o.TimeoutMinutes != 0 {
			bad("dueTime: the order's deadline is its dueTime; give createTime, timeoutColumn and timeoutMinutes only without it (leave them out or set them to '' and 0)")
		}
	case o.TimeoutColumn == "" && o.TimeoutMinutes <= 0:
		bad("timeoutColumn, timeoutMinutes: name the column holding each order's timeout, give one timeout in minutes for all orders, or name the column holding each order's deadline in dueTime")
	case o.TimeoutColumn != "" && o.TimeoutMinutes != 0:
		bad("timeoutColumn, timeoutMinutes: give one of them, not both")
	}
	it := s.Items
	name("items.table", it.Table, true)
	name("items.index", it.Index, true)
	name("items.orderColumn", it.OrderColumn, true)
	name("items.sku", it.SKU, true)
	name("items.quantity", it.Quantity, true)
	if st := s.Stock; st != nil {
		name("stock.table", st.Table, true)
		name("stock.key", st.Key, true)
		name("stock.index", st.Index, false)
		if len(st.Columns) == 0 {
			bad("stock.columns: at least one column, or no stock table")
		}
		seen := map[string]bool{}
		for _, c := range st.Columns {
			name("stock.columns", c.Name, true)
			if seen[c.Name] {
				bad("stock.columns: %s named twice", c.Name)
			}
			seen[c.Name] = true
		}
	}
	if c := s.Coupon; c != nil {
		errs = append(errs, c.validate(o, name)...)
	}
	for _, g := range s.Extra {
		for _, n := range []string{g.Table, g.Column, g.Amount, g.Key, g.OrderKey} {
			name("givebacks", n, true)
		}
	}
	return errors.Join(errs...)
}

func (c *Coupon) validate(o Orders, name func(key, v string, required bool)) []error {
	var errs []error
	name("coupon.table", c.Table, true)
	name("coupon.status", c.Status, true)
	if c.Used.IsZero() || c.Unused.IsZero() || c.Used == c.Unused {
		errs = append(errs, errors.New("coupon.used, coupon.unused: two different status values are required"))
	}
	if c.ByMatch() {
		for _, p := range c.Match {
			name("coupon.match", p.Column, true)
			name("coupon.match", p.OrderColumn, true)
		}
		name("coupon.index", c.Index, false)
		if c.AnyCopy {
			name("coupon.id", c.ID, true)
		}
		return errs
	}
	if c.Optional {
		errs = append(errs, errors.New("coupon.optional: only with coupon.match (a coupon by id is named by the order, NULL for none)"))
	}
	if c.AnyCopy {
		errs = append(errs, errors.New("coupon.anyCopy: only with coupon.match (a coupon by id is one row, named by the order)"))
	}
	name("coupon.orderColumn", c.OrderColumn, true)
	name("coupon.id", c.ID, true)
	name("coupon.orderNo", c.OrderNo, false)
	return errs
}
