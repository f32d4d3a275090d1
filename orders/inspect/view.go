// Package inspect is the operators' read-only views of the order tables:
// one order with everything the executor's tables hold about it (View),
// the figures the console's home page shows first (due orders, dead
// letters by status, fulfilment flags), the fulfilment-flag list, and the
// records of close runs (CloseRuns). It only reads: package orders writes
// every row shown here (the close path its close records and run records),
// and lifecycle the fulfilment flags.
package inspect

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/orderstatus"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
	"github.com/orderjob/executor/orders/schema"
)

// View is the operators' read-only view of an order and of the
// figures an operator looks at first: due orders, dead letters by status,
// fulfilment flags. Every statement behind it reads a bounded number of
// rows through a named index; counts that could grow without bound stop at
// CountCap. It needs only the database (its due orders, the close's units:
// CountingDue) and is safe for concurrent use.
type View struct {
	db      *sqlx.DB
	mode    orders.CompensationMode
	store   store
	letters *deadletters.Ops
	tables  []table // where Order looks an order up, in turn
	units   []Unit  // whose due orders DueOrders counts
}

// New returns the view over db; mode says whether closes give stock and
// coupons back here (orders.CompensateLocal) or through outbox events.
// It looks orders up in order_info.
func New(db *sqlx.DB, mode orders.CompensationMode) *View {
	return &View{db: db, mode: mode, letters: deadletters.New(db), tables: []table{defaultTable}}
}

// InTables returns the view that looks an order up in each of tables in
// turn (the order tables of one order source), each with its item table
// following sch's suffix (schema.ForTable). The tables are read with the
// executor's own columns and indexes (order_info's and order_item's), or
// with a declared schema's (sch.Declared: order.schema.table) by the names
// it gives them.
func (i *View) InTables(sch schema.Schema, tables []string) (*View, error) {
	if len(tables) == 0 {
		return nil, fmt.Errorf("inspect: a View in tables needs at least one")
	}
	out := *i
	out.tables = nil
	for _, t := range tables {
		s, err := sch.ForTable(t)
		if err != nil {
			return nil, err
		}
		if !sch.Declared {
			out.tables = append(out.tables, renderTable(t, s.Items.Table))
			continue
		}
		st, err := renderShopTable(s)
		if err != nil {
			return nil, err
		}
		out.tables = append(out.tables, st)
	}
	return &out, nil
}

// Tables are the order tables Order looks an order up in.
func (i *View) Tables() []string {
	out := make([]string, len(i.tables))
	for k, t := range i.tables {
		out[k] = t.name
	}
	return out
}

// CountCap bounds the counts of the operator's views: beyond it a count
// says "at least CountCap".
const CountCap = 10000

// statusName names an order_info.status value.
func statusName(s int) string {
	switch s {
	case orderstatus.Unpaid:
		return "unpaid"
	case orderstatus.Paid:
		return "paid"
	case orderstatus.Closed:
		return "closed"
	case orderstatus.Shipped:
		return "shipped"
	case orderstatus.Completed:
		return "completed"
	}
	return fmt.Sprintf("status %d", s)
}

// OrderRecord is an order_info row as an operator sees it. Times are the
// database session's wall clock.
type OrderRecord struct {
	ID             int64          `db:"id"`
	OrderNo        string         `db:"order_no"`
	UserID         int64          `db:"user_id"`
	Status         int            `db:"status"`
	CreateTime     time.Time      `db:"create_time"`
	TimeoutMinutes int            `db:"timeout_minutes"`
	CouponID       sql.NullInt64  `db:"coupon_id"`
	PayAmount      string         `db:"pay_amount"`
	PayTime        sql.NullTime   `db:"pay_time"`
	ShipTime       sql.NullTime   `db:"ship_time"`
	CompleteTime   sql.NullTime   `db:"complete_time"`
	CloseTime      sql.NullTime   `db:"close_time"`
	CloseReason    sql.NullString `db:"close_reason"`
	UpdateTime     time.Time      `db:"update_time"`
}

// Deadline is when the order falls due: create_time + timeout_minutes.
func (o OrderRecord) Deadline() time.Time { return deadline(o.CreateTime, o.TimeoutMinutes) }

// deadline is when an order created at created falls due, timeout minutes on.
func deadline(created time.Time, timeout int) time.Time {
	return created.Add(time.Duration(timeout) * time.Minute)
}

// StatusName names the status.
func (o OrderRecord) StatusName() string { return statusName(o.Status) }

// OrderItem is one order_item line.
type OrderItem struct {
	ID       int64 `db:"id"`
	SKUID    int64 `db:"sku_id"`
	Quantity int64 `db:"quantity"`
}

// StockRow is the inventory row of one SKU.
type StockRow struct {
	SKUID     int64 `db:"sku_id"`
	Available int64 `db:"available"`
	Locked    int64 `db:"locked"`
}

// CouponRow is a user_coupon row; Status 0 unused, 1 locked by an unpaid
// order, 2 used.
type CouponRow struct {
	ID      int64          `db:"id"`
	UserID  int64          `db:"user_id"`
	Status  int            `db:"status"`
	OrderNo sql.NullString `db:"order_no"`
}

// StatusName names the coupon's status.
func (c CouponRow) StatusName() string {
	switch c.Status {
	case 0:
		return "unused"
	case 1:
		return "locked"
	case 2:
		return "used"
	}
	return fmt.Sprintf("status %d", c.Status)
}

// CloseLogRow is the order's order_close_log row.
type CloseLogRow struct {
	ID       int64     `db:"id"`
	OrderNo  string    `db:"order_no"`
	ClosedAt time.Time `db:"closed_at"`
	Reason   string    `db:"reason"`
}

// FulfilmentFlag is an order_fulfillment_overdue row: a paid order not
// shipped in time, with the order's current status and ship time.
type FulfilmentFlag struct {
	ID        int64     `db:"id"`
	OrderID   int64     `db:"order_id"`
	OrderNo   string    `db:"order_no"`
	UserID    int64     `db:"user_id"`
	PayTime   time.Time `db:"pay_time"`
	Deadline  time.Time `db:"deadline"`
	FlaggedAt time.Time `db:"flagged_at"`
	// OrderTable is the order table the flag was written from, where
	// OrderID is the order's id (migration 0139); "" on flags written
	// before.
	OrderTable string `db:"order_table"`
	// OrderStatus and ShipTime are the order's, read by OrderID from
	// OrderTable (see View.readFlagged); OrderStatus is -1 when the order
	// is not there, or the table is not one the View reads.
	OrderStatus int          `db:"-"`
	ShipTime    sql.NullTime `db:"-"`
}

// Open reports whether the flagged order is still waiting to be shipped.
func (f FulfilmentFlag) Open() bool { return f.OrderStatus == orderstatus.Paid }

// OrderDetail is everything the executor's tables hold about one order.
type OrderDetail struct {
	// Table is the order table the order was found in.
	Table   string
	OrderNo string
	// Order is the order's row, items its lines, Stock and Coupon their
	// rows in the executor's own tables; in a declared shop schema's
	// tables, Shop holds them all instead and these stay empty.
	Order OrderRecord
	Shop  *ShopOrder
	Items []OrderItem
	// Stock holds the inventory rows of the order's SKUs and Coupon its
	// coupon's row, in local compensation mode; in outbox mode stock and
	// coupons live in other services and these stay empty.
	Stock  []StockRow
	Coupon *CouponRow
	// CloseLog is the order's close record, nil while it is not closed.
	CloseLog *CloseLogRow
	// DeadLetters are the order's letters, one per stage.
	DeadLetters []deadletters.Letter
	// Fulfilment is the order's fulfilment flag, if it has one.
	Fulfilment *FulfilmentFlag
	// Outbox holds the order's compensation events in outbox mode.
	Outbox []outbox.Event
	// Conflicts are payments of the order that could not be taken
	// (refunds owed or made).
	Conflicts []refunds.Conflict
	Mode      orders.CompensationMode
}

// Order returns what the tables hold about orderNo, or orders.ErrOrderNotFound.
func (i *View) Order(ctx context.Context, orderNo string) (*OrderDetail, error) {
	return i.OrderIn(ctx, orderNo, "")
}

// OrderIn is Order looking in table first when it is one of the
// View's tables (the table a dead letter names), then in the others.
func (i *View) OrderIn(ctx context.Context, orderNo, table string) (*OrderDetail, error) {
	if orderNo == "" || len(orderNo) > oplist.MaxOrderNoLen {
		return nil, oplist.Invalid("orderNo", "order number must be 1-%d bytes", oplist.MaxOrderNoLen)
	}
	o, shop, t, err := i.find(ctx, orderNo, table)
	if err != nil {
		return nil, err
	}
	d := &OrderDetail{Table: t.name, Mode: i.mode}
	if shop != nil {
		d.OrderNo = shop.OrderNo
		if d.Shop, err = i.shopOrder(ctx, t, shop); err != nil {
			return nil, err
		}
	} else if err = i.ownRows(ctx, d, t, o, orderNo); err != nil {
		return nil, err
	}
	if d.CloseLog, err = i.store.closeLogRow(ctx, i.db, orderNo); err != nil {
		return nil, err
	}
	if d.DeadLetters, err = i.letters.OfOrder(ctx, orderNo); err != nil {
		return nil, err
	}
	if shop == nil { // a shop's orders have no fulfilment flags
		if d.Fulfilment, err = i.flagOfOrder(ctx, orderNo, t); err != nil {
			return nil, err
		}
	}
	if i.mode == orders.CompensateOutbox {
		if d.Outbox, err = outbox.OfOrder(ctx, i.db, orderNo); err != nil {
			return nil, err
		}
	}
	if d.Conflicts, err = refunds.OfOrder(ctx, i.db, orderNo); err != nil {
		return nil, err
	}
	return d, nil
}

// flagOfOrder reads the fulfilment flag of orderNo, found in the order
// table t, with the order's state from the table the flag names (from t
// when it names none).
func (i *View) flagOfOrder(ctx context.Context, orderNo string, t table) (*FulfilmentFlag, error) {
	f, err := i.store.flagOfOrder(ctx, i.db, orderNo)
	if f == nil || err != nil {
		return f, err
	}
	flags := []FulfilmentFlag{*f}
	if err := i.readFlagged(ctx, flags, t); err != nil {
		return nil, err
	}
	return &flags[0], nil
}

// readFlagged sets each flag's OrderStatus and ShipTime from its order's
// row in the order table the flag names (order_table, migration 0139), by
// its id, one statement per table; a flag naming none (written before
// 0139) from unnamed. The names read from the flags are never put in a
// statement: only those of the View's tables in the executor's own
// columns, and order_info, are looked up (flagTable), each with the
// statement rendered for it from the configuration. A flag naming another
// table, or whose order is not in it, keeps OrderStatus -1.
func (i *View) readFlagged(ctx context.Context, flags []FulfilmentFlag, unnamed table) error {
	byTable := map[string][]int{}
	for k := range flags {
		flags[k].OrderStatus = -1
		name := cmp.Or(flags[k].OrderTable, unnamed.name)
		byTable[name] = append(byTable[name], k)
	}
	for _, name := range slices.Sorted(maps.Keys(byTable)) {
		t, ok := i.flagTable(name, unnamed)
		if !ok {
			continue
		}
		ids := make([]int64, len(byTable[name]))
		for n, k := range byTable[name] {
			ids[n] = flags[k].OrderID
		}
		rows, err := i.store.flaggedOrders(ctx, i.db, t, ids)
		if err != nil {
			return err
		}
		byID := make(map[int64]flaggedOrder, len(rows))
		for _, r := range rows {
			byID[r.ID] = r
		}
		for _, k := range byTable[name] {
			if r, ok := byID[flags[k].OrderID]; ok {
				flags[k].OrderStatus, flags[k].ShipTime = r.Status, r.ShipTime
			}
		}
	}
	return nil
}

// flagTable is the table called name whose orders a flag's state is read
// from: unnamed, one of the View's tables in the executor's own columns
// (a declared schema's orders are never flagged), or order_info.
func (i *View) flagTable(name string, unnamed table) (table, bool) {
	if name == unnamed.name && unnamed.shop == nil {
		return unnamed, true
	}
	for _, t := range i.tables {
		if t.name == name && t.shop == nil {
			return t, true
		}
	}
	return defaultTable, name == defaultTable.name
}

// ownRows fills d with the order's row o and its lines, stock and coupon
// rows in the executor's own tables.
func (i *View) ownRows(ctx context.Context, d *OrderDetail, t table, o *OrderRecord, orderNo string) error {
	d.Order, d.OrderNo = *o, o.OrderNo
	var err error
	if d.Items, err = i.store.itemsOfOrder(ctx, i.db, t, orderNo); err != nil {
		return err
	}
	if i.mode == orders.CompensateLocal {
		skus := map[int64]bool{}
		for _, it := range d.Items {
			skus[it.SKUID] = true
		}
		if d.Stock, err = i.store.stockRows(ctx, i.db, slices.Sorted(maps.Keys(skus))); err != nil {
			return err
		}
		if o.CouponID.Valid {
			if d.Coupon, err = i.store.couponRow(ctx, i.db, o.CouponID.Int64); err != nil {
				return err
			}
		}
	}
	return nil
}

// find looks orderNo up in the View's tables in turn, first (a
// table's name) before the others: order numbers
// are unique across the tables of a database, so the first that holds it
// is its table. orders.ErrOrderNotFound names the tables when there are several.
// It returns the order's row in the executor's own columns, or in a
// declared schema's (shop).
func (i *View) find(ctx context.Context, orderNo, first string) (*OrderRecord, *ShopRow, table, error) {
	tables := i.tables
	if k := slices.IndexFunc(tables, func(t table) bool { return t.name == first }); k > 0 {
		tables = append([]table{tables[k]}, slices.Delete(slices.Clone(tables), k, k+1)...)
	}
	var err error
	for _, t := range tables {
		if t.shop != nil {
			var s *ShopRow
			if s, err = orderRow[ShopRow](ctx, i.db, t.shop.Order, orderNo); !errors.Is(err, orders.ErrOrderNotFound) {
				return nil, s, t, err
			}
			continue
		}
		var o *OrderRecord
		if o, err = orderRow[OrderRecord](ctx, i.db, t.order, orderNo); !errors.Is(err, orders.ErrOrderNotFound) {
			return o, nil, t, err
		}
	}
	if len(i.tables) > 1 {
		err = fmt.Errorf("order %s in %d order tables (%s ... %s): %w", orderNo, len(i.tables),
			i.tables[0].name, i.tables[len(i.tables)-1].name, orders.ErrOrderNotFound)
	}
	return nil, nil, table{}, err
}

// Unit is one unit of the close sweep, an order table of one database,
// as DueOrders counts its due orders: an *orders.Closer.
type Unit interface {
	Overdue(ctx context.Context) (count int, oldest time.Duration, err error)
}

// CountingDue returns the view whose DueOrders counts the due orders of
// units (the close's units of the view's order tables).
func (i *View) CountingDue(units ...Unit) *View {
	out := *i
	out.units = units
	return &out
}

// Due is what the close sweep has in front of it: unpaid orders past their
// deadline by the database clock and not held back by a dead letter.
type Due struct {
	Count int // the sum of the units' counts, up to CountCap
	// Oldest is how long ago the earliest deadline among them passed.
	Oldest time.Duration
}

// DueOrders counts the due orders of the view's units (CountingDue), as
// the overdue gauges do per unit: the sum of their counts up to CountCap
// (each unit counts up to as many), and the oldest among them. A unit's
// error is DueOrders'; a view without units has no count.
func (i *View) DueOrders(ctx context.Context) (Due, error) {
	if len(i.units) == 0 {
		return Due{}, errors.New("inspect: no unit of the close counts these due orders")
	}
	var d Due
	for _, u := range i.units {
		n, oldest, err := u.Overdue(ctx)
		if err != nil {
			return Due{}, err
		}
		d.Count = min(d.Count+n, CountCap)
		d.Oldest = max(d.Oldest, oldest)
	}
	return d, nil
}

// DeadLetterCounts counts the letters of each status, each up to CountCap.
func (i *View) DeadLetterCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, st := range []string{deadletters.Waiting, deadletters.Parked, deadletters.Resolved} {
		n, err := i.letters.Count(ctx, st, CountCap)
		if err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, nil
}

// FlagCounts are the fulfilment flags: all of them and those raised in the
// last day, each up to CountCap.
type FlagCounts struct {
	Total, LastDay int
}

// FulfilmentCounts counts the fulfilment flags.
func (i *View) FulfilmentCounts(ctx context.Context) (FlagCounts, error) {
	now, err := sqlexec.Now(ctx, i.db)
	if err != nil {
		return FlagCounts{}, err
	}
	var c FlagCounts
	if c.Total, err = i.store.countFlags(ctx, i.db, sqlexec.Earliest, CountCap); err != nil {
		return c, err
	}
	c.LastDay, err = i.store.countFlags(ctx, i.db, now.Add(-24*time.Hour), CountCap)
	return c, err
}

// FlagQuery selects a page of fulfilment flags, most recently flagged
// first.
type FlagQuery struct {
	// Since keeps flags raised at or after it (zero: all).
	Since time.Time
	// Open keeps only flags whose order is still unshipped (checked on the
	// rows of the search window).
	Open bool
	// After continues a list where its previous page's Next left off.
	After oplist.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// FlagPage is one page of flags.
type FlagPage struct {
	Flags      []FulfilmentFlag
	Next       oplist.Cursor
	Examined   int
	WindowFull bool
}

// FulfilmentFlags returns one page of flags (see FlagQuery).
func (i *View) FulfilmentFlags(ctx context.Context, q FlagQuery) (FlagPage, error) {
	var p FlagPage
	if err := oplist.CheckLimit(&q.Limit); err != nil {
		return p, err
	}
	if !q.After.IsZero() && q.After.At.IsZero() {
		return p, oplist.Invalid("after", "after %q belongs to another list", q.After)
	}
	window := q.Limit + 1
	if q.Open {
		window = oplist.SearchWindow
	}
	rows, err := i.store.flagWindow(ctx, i.db, q, window)
	if err != nil {
		return p, err
	}
	// Flags written before migration 0139 name no table: their orders are
	// read in order_info, as the list always did.
	if err := i.readFlagged(ctx, rows, defaultTable); err != nil {
		return p, err
	}
	p.Flags, p.Next, p.Examined, p.WindowFull = oplist.PickRows(rows, q.Limit, window, true, func(f FulfilmentFlag) oplist.WindowKey {
		return oplist.WindowKey{ID: f.ID, At: f.FlaggedAt, Hit: !q.Open || f.Open()}
	})
	return p, nil
}

// Now reads the database clock (the session's wall clock, the one every
// order-table time is on), for time filters given as "6h ago".
func (i *View) Now(ctx context.Context) (time.Time, error) { return sqlexec.Now(ctx, i.db) }
