package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the auto-confirm job and the
// fulfillment-timeout job. Like the close path, ids are rendered as literal
// lists; everything else is bound. The statements name the order table
// {order_table}: a Jobs renders them once for its table (Config.Table, an
// order table of order.sources, or order_info).

// orderTablePlaceholder stands for the order table in the statements.
const orderTablePlaceholder = "{order_table}"

// statements are the package's statements on one order table.
type statements struct {
	scanShipped, completeOrders, scanOverdue, flagOverdue string
}

// render returns the statements on table (a plain name, checked by New).
func render(table string) statements {
	r := strings.NewReplacer(orderTablePlaceholder, table)
	return statements{scanShipped: r.Replace(scanShippedSQL), completeOrders: r.Replace(completeOrdersSQL),
		scanOverdue: r.Replace(scanOverdueSQL), flagOverdue: r.Replace(flagOverdueSQL)}
}

// store runs the package's statements, rendered for its order table
// (table), on a *sqlx.DB or *sqlx.Tx.
type store struct {
	sql   statements
	table string
}

// newStore returns the store of table (a plain name, checked by New).
func newStore(table string) store { return store{sql: render(table), table: table} }

// row is one order found by a lifecycle scan page; At is its
// ship_time (auto-confirm) or pay_time (fulfillment timeout).
type row struct {
	ID      int64     `db:"id"`
	OrderNo string    `db:"order_no"`
	At      time.Time `db:"at"`
}

// cursor is the keyset position of a lifecycle scan: the (time,
// id) of the last row returned.
type cursor struct {
	At time.Time
	ID int64
}

// scanParams are scanShippedSQL's and scanOverdueSQL's.
type scanParams struct {
	Cutoff     time.Time `db:"cutoff"`
	AfterAt    time.Time `db:"after_at"`
	AfterID    int64     `db:"after_id"`
	ShardTotal int       `db:"shard_total"`
	ShardIndex int       `db:"shard_index"`
	Limit      int       `db:"limit"`
}

func scanArgs(cur cursor, cutoff time.Time, shardIndex, shardTotal, limit int) scanParams {
	return scanParams{Cutoff: cutoff, AfterAt: cur.At, AfterID: cur.ID,
		ShardTotal: shardTotal, ShardIndex: shardIndex, Limit: limit}
}

// scanShippedSQL reads the next keyset page of shipped orders of one shard
// shipped at or before the cutoff.
//
// The cursor is the last row of the previous page (the first page passes
// year 1000 and id -1). A plain consistent read walking idx_status_ship_time (status, ship_time, id) from
// the cursor: no locks, nothing outside status = 3 AND ship_time <= cutoff is
// read, and the shard is checked on the index entry (id is its suffix).
// Shipped orders without ship_time sort before the first cursor and are
// never returned. Returns up to limit rows in key order.
var scanShippedSQL = `
SELECT o.id, o.order_no, o.ship_time AS at
FROM {order_table} o FORCE INDEX (idx_status_ship_time)
WHERE o.status = 3
  AND o.ship_time <= :cutoff
  AND (o.ship_time > :after_at OR (o.ship_time = :after_at AND o.id > :after_id))
  AND ` + shard.Match("o.id") + `
ORDER BY o.ship_time, o.id
LIMIT :limit`

func (s store) scanShipped(ctx context.Context, q sqlx.QueryerContext, cur cursor, cutoff time.Time, shardIndex, shardTotal, limit int) ([]row, error) {
	return scan(ctx, q, s.sql.scanShipped, "shipped", scanArgs(cur, cutoff, shardIndex, shardTotal, limit))
}

// scan reads a page of a scan, query (scanShippedSQL or scanOverdueSQL)
// with p; what names the orders it reads in errors.
func scan(ctx context.Context, q sqlx.QueryerContext, query, what string, p scanParams) ([]row, error) {
	var rows []row
	if err := sqlexec.SelectNamed(ctx, q, &rows, query, p); err != nil {
		return nil, fmt.Errorf("scan %s orders after (%s, %d): %w", what, p.AfterAt.Format(time.DateTime), p.AfterID, err)
	}
	return rows, nil
}

// completeOrdersSQL is the auto-confirm's status CAS, shipped to completed.
//
// The ids are a literal list. One autocommit statement per page: it locks the listed rows through the primary key and changes those
// still shipped at or before the cutoff (the WHERE repeats the scan's
// condition, so an order returned, re-shipped or confirmed by its buyer in
// between is left alone and a second run changes nothing). complete_time is
// the database clock. Rows affected: the orders completed.
const completeOrdersSQL = `
UPDATE {order_table} FORCE INDEX (PRIMARY) SET status = 4, complete_time = NOW(3)
WHERE id IN (%s) AND status = 3 AND ship_time <= :cutoff`

func (s store) completeOrders(ctx context.Context, e sqlx.ExecerContext, ids []int64, cutoff time.Time) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(s.sql.completeOrders, sqlexec.IntList(ids)), map[string]any{"cutoff": cutoff})
	if err != nil {
		return 0, fmt.Errorf("complete %d orders: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// scanOverdueSQL reads the next keyset page of paid orders of one shard paid
// at or before the cutoff and not flagged yet.
//
// A plain consistent read walking idx_status_pay_time
// (status, pay_time, id) from the cursor, with one eq_ref probe of
// order_fulfillment_overdue.uk_order_no per candidate (an anti-join: a LEFT
// JOIN ... IS NULL, because MariaDB materialises the whole flag table for
// the NOT EXISTS form), so flagged orders do not fill the pages (they are
// still walked while they stay unshipped). Paid orders without pay_time
// (paid before the column existed) are never returned. Returns up to limit
// rows in key order.
var scanOverdueSQL = `
SELECT o.id, o.order_no, o.pay_time AS at
FROM {order_table} o FORCE INDEX (idx_status_pay_time)
LEFT JOIN order_fulfillment_overdue f ON f.order_no = o.order_no
WHERE o.status = 1
  AND o.pay_time <= :cutoff
  AND (o.pay_time > :after_at OR (o.pay_time = :after_at AND o.id > :after_id))
  AND ` + shard.Match("o.id") + `
  AND f.id IS NULL
ORDER BY o.pay_time, o.id
LIMIT :limit`

func (s store) scanOverdue(ctx context.Context, q sqlx.QueryerContext, cur cursor, cutoff time.Time, shardIndex, shardTotal, limit int) ([]row, error) {
	return scan(ctx, q, s.sql.scanOverdue, "paid", scanArgs(cur, cutoff, shardIndex, shardTotal, limit))
}

// flagOverdueSQL flags a page of overdue orders, once each.
//
// The deadline is pay_time + days; the ids are a literal list. INSERT ... SELECT re-reads the orders in the same statement and
// keeps only those still paid and paid at or before the cutoff, so an order
// shipped since the scan is not flagged; the order rows are only read (a
// shared lock on each while the statement runs), never changed.
// uk_order_no makes a second flag of an order a no-op (the ON DUPLICATE
// KEY assignment changes nothing, so it counts 0 rows). order_table is the
// table the flag is read from (migration 0139): order_id is the id in that
// table. Rows affected: the orders flagged now.
const flagOverdueSQL = `
INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at, order_table)
SELECT o.id, o.order_no, o.user_id, o.pay_time, o.pay_time + INTERVAL :days DAY, NOW(3), :order_table
FROM {order_table} o FORCE INDEX (PRIMARY)
WHERE o.id IN (%s) AND o.status = 1 AND o.pay_time <= :cutoff
ON DUPLICATE KEY UPDATE flagged_at = order_fulfillment_overdue.flagged_at`

func (s store) flagOverdue(ctx context.Context, e sqlx.ExecerContext, ids []int64, days int, cutoff time.Time) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(s.sql.flagOverdue, sqlexec.IntList(ids)),
		map[string]any{"days": days, "cutoff": cutoff, "order_table": s.table})
	if err != nil {
		return 0, fmt.Errorf("flag %d overdue orders: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// rowIDs returns the ids of rows.
func rowIDs(rows []row) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}
