package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/schema"
)

// This file holds the SQL of the order view (View): one order's rows,
// bounded counts, and the fulfilment-flag list. Each statement reaches its
// rows through a named index and takes no locks. store_closerun.go holds
// the close-run records'.

// store runs the package's statements on a *sqlx.DB or *sqlx.Tx.
type store struct{}

// orderRecordFromSQL reads one order, by number, from an order table
// (%s: order_info, or a table of an order source) through uk_order_no.
const orderRecordFromSQL = `
SELECT id, order_no, user_id, status, create_time, timeout_minutes, coupon_id, pay_amount,
       pay_time, ship_time, complete_time, close_time, close_reason, update_time
FROM %s FORCE INDEX (uk_order_no) WHERE order_no = ?`

// orderRecordSQL reads one order_info row.
var orderRecordSQL = fmt.Sprintf(orderRecordFromSQL, "order_info")

// orderRow reads one order row by its number with query (a table's
// order or shop.Order statement), or orders.ErrOrderNotFound.
func orderRow[T any](ctx context.Context, q sqlx.QueryerContext, query, orderNo string) (*T, error) {
	o, err := sqlexec.GetOne[T](ctx, q, query, orderNo)
	if err != nil {
		return nil, fmt.Errorf("read order %s: %w", orderNo, err)
	}
	if o == nil {
		return nil, fmt.Errorf("order %s: %w", orderNo, orders.ErrOrderNotFound)
	}
	return o, nil
}

// itemsOfOrderFromSQL reads one order's lines, by its number, from an item
// table (%s: order_item, or the one following an order source's table)
// through idx_order_no.
const itemsOfOrderFromSQL = `SELECT id, sku_id, quantity FROM %s FORCE INDEX (idx_order_no) WHERE order_no = ? ORDER BY id`

// itemsOfOrderSQL reads one order's order_item lines.
var itemsOfOrderSQL = fmt.Sprintf(itemsOfOrderFromSQL, "order_item")

func (store) itemsOfOrder(ctx context.Context, q sqlx.QueryerContext, t table, orderNo string) ([]OrderItem, error) {
	var rows []OrderItem
	if err := sqlx.SelectContext(ctx, q, &rows, t.items, orderNo); err != nil {
		return nil, fmt.Errorf("read items of %s: %w", orderNo, err)
	}
	return rows, nil
}

// stockRowsSQL reads the inventory rows of the listed SKUs (literal id
// list) through the primary key.
const stockRowsSQL = `SELECT sku_id, available, locked FROM inventory FORCE INDEX (PRIMARY) WHERE sku_id IN (%s) ORDER BY sku_id`

func (store) stockRows(ctx context.Context, q sqlx.QueryerContext, skus []int64) ([]StockRow, error) {
	if len(skus) == 0 {
		return nil, nil
	}
	var rows []StockRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(stockRowsSQL, sqlexec.IntList(skus))); err != nil {
		return nil, fmt.Errorf("read stock of %d SKUs: %w", len(skus), err)
	}
	return rows, nil
}

// couponRowSQL reads one coupon by its id (the primary key).
const couponRowSQL = `SELECT id, user_id, status, order_no FROM user_coupon FORCE INDEX (PRIMARY) WHERE id = ?`

func (store) couponRow(ctx context.Context, q sqlx.QueryerContext, id int64) (*CouponRow, error) {
	c, err := sqlexec.GetOne[CouponRow](ctx, q, couponRowSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read coupon %d: %w", id, err)
	}
	return c, nil
}

// closeLogRowSQL reads an order's close record, by order number, through
// uk_order_no.
const closeLogRowSQL = `SELECT id, order_no, closed_at, reason FROM order_close_log FORCE INDEX (uk_order_no) WHERE order_no = ?`

func (store) closeLogRow(ctx context.Context, q sqlx.QueryerContext, orderNo string) (*CloseLogRow, error) {
	r, err := sqlexec.GetOne[CloseLogRow](ctx, q, closeLogRowSQL, orderNo)
	if err != nil {
		return nil, fmt.Errorf("read close log of %s: %w", orderNo, err)
	}
	return r, nil
}

// flagColumns are an order_fulfillment_overdue row's: the flag, and the
// order table it names (migration 0139; empty on flags written before).
const flagColumns = `id, order_id, order_no, user_id, pay_time, deadline, flagged_at, order_table`

// flagOfOrderSQL reads an order's fulfilment flag, by order number,
// through uk_order_no.
const flagOfOrderSQL = `SELECT ` + flagColumns + ` FROM order_fulfillment_overdue FORCE INDEX (uk_order_no) WHERE order_no = ?`

// flaggedOrdersFromSQL reads the current status and ship time of flagged
// orders, by their ids (a literal list, the second %s), from the order
// table the flags name (%s: order_info, or a table of an order source)
// through its primary key.
const flaggedOrdersFromSQL = `SELECT id, status, ship_time FROM %s FORCE INDEX (PRIMARY) WHERE id IN (%%s)`

// flaggedOrdersSQL reads flagged orders' rows of order_info.
var flaggedOrdersSQL = fmt.Sprintf(flaggedOrdersFromSQL, "order_info")

// table is an order table the View looks orders up in, with the
// statements rendered for it and its item table: the executor's own
// columns (order, items, flagged), or a declared shop schema's (shop).
type table struct {
	name                  string
	order, items, flagged string
	shop                  *closesql.ViewStatements // nil on the executor's own columns
	schema                schema.Schema            // the declared schema shop follows
}

// defaultTable is the executor's own order_info and order_item.
var defaultTable = table{name: "order_info", order: orderRecordSQL, items: itemsOfOrderSQL, flagged: flaggedOrdersSQL}

// renderTable renders the statements for an order table and its item
// table, both checked identifiers of the configuration.
func renderTable(orderTable, itemTable string) table {
	o, it := schema.Quote(orderTable), schema.Quote(itemTable)
	return table{name: orderTable, order: fmt.Sprintf(orderRecordFromSQL, o),
		items: fmt.Sprintf(itemsOfOrderFromSQL, it), flagged: fmt.Sprintf(flaggedOrdersFromSQL, o)}
}

func (store) flagOfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) (*FulfilmentFlag, error) {
	f, err := sqlexec.GetOne[FulfilmentFlag](ctx, q, flagOfOrderSQL, orderNo)
	if err != nil {
		return nil, fmt.Errorf("read fulfilment flag of %s: %w", orderNo, err)
	}
	return f, nil
}

// flaggedOrder is a flagged order's current state in its order table.
type flaggedOrder struct {
	ID       int64        `db:"id"`
	Status   int          `db:"status"`
	ShipTime sql.NullTime `db:"ship_time"`
}

func (store) flaggedOrders(ctx context.Context, q sqlx.QueryerContext, t table, ids []int64) ([]flaggedOrder, error) {
	rows, err := sqlexec.SelectIDs[flaggedOrder](ctx, q, t.flagged, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d flagged orders of %s: %w", len(ids), t.name, err)
	}
	return rows, nil
}

// flagWindowSQL is the fulfilment-flag list's window: most recently
// flagged first from the cursor (each order's status is read from its own
// table afterwards, flaggedOrdersFromSQL).
//
// Flags since a time, before the cursor (before_at, before_id). A
// backwards range of idx_flagged_at (flagged_at, id); no locks.
const flagWindowSQL = `SELECT ` + flagColumns + `
FROM order_fulfillment_overdue FORCE INDEX (idx_flagged_at)
WHERE flagged_at >= :since AND (flagged_at < :before_at OR (flagged_at = :before_at AND id < :before_id))
ORDER BY flagged_at DESC, id DESC
LIMIT :window`

func (store) flagWindow(ctx context.Context, q sqlx.QueryerContext, f FlagQuery, window int) ([]FulfilmentFlag, error) {
	since := f.Since
	if since.IsZero() {
		since = sqlexec.Earliest
	}
	beforeAt, beforeID := f.After.Before(sqlexec.Latest)
	var rows []FulfilmentFlag
	if err := sqlexec.SelectNamed(ctx, q, &rows, flagWindowSQL, map[string]any{
		"since": since, "before_at": beforeAt, "before_id": beforeID, "window": window}); err != nil {
		return nil, fmt.Errorf("list fulfilment flags: %w", err)
	}
	return rows, nil
}

// countFlagsSQL counts the flags raised since a time, up to a cap.
// A range of idx_flagged_at, at most cap entries.
const countFlagsSQL = `
SELECT COUNT(*) FROM (
  SELECT 1 FROM order_fulfillment_overdue FORCE INDEX (idx_flagged_at) WHERE flagged_at >= :since LIMIT :cap
) t`

func (store) countFlags(ctx context.Context, q sqlx.QueryerContext, since time.Time, limit int) (int, error) {
	var n int
	if err := sqlexec.GetNamed(ctx, q, &n, countFlagsSQL, map[string]any{"since": since, "cap": limit}); err != nil {
		return 0, fmt.Errorf("count fulfilment flags: %w", err)
	}
	return n, nil
}
