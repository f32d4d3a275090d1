package orderdemo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the demo generator's SQL. The generator renders rows as
// literals (numbers, timestamps and order numbers it made itself, checked to
// be [A-Za-z0-9_-]) into multi-row INSERTs of a few thousand rows each.

// store runs the package's statements on a *sqlx.DB.
type store struct{}

// demoStartSQL reads the database clock (seconds precision, like
// create_time) and the highest order and coupon ids, so generated ids follow
// existing ones. No locks; one row.
const demoStartSQL = `
SELECT NOW() AS now,
       (SELECT COALESCE(MAX(id), 0) FROM order_info) AS max_order,
       (SELECT COALESCE(MAX(id), 0) FROM user_coupon) AS max_coupon`

type demoStart struct {
	Now       time.Time `db:"now"`
	MaxOrder  int64     `db:"max_order"`
	MaxCoupon int64     `db:"max_coupon"`
}

func (store) demoStart(ctx context.Context, q sqlx.QueryerContext) (demoStart, error) {
	var s demoStart
	if err := sqlx.GetContext(ctx, q, &s, demoStartSQL); err != nil {
		return s, fmt.Errorf("read clock and ids: %w", err)
	}
	return s, nil
}

// Multi-row insert heads; the generator appends the literal rows.
const (
	// Rows: (id, order_no, user_id, status, create_time, timeout_minutes, coupon_id).
	demoInsertOrdersSQL = `INSERT INTO order_info (id, order_no, user_id, status, create_time, timeout_minutes, coupon_id) VALUES `
	// Rows: (order_no, sku_id, quantity).
	demoInsertItemsSQL = `INSERT INTO order_item (order_no, sku_id, quantity) VALUES `
	// Rows: (id, user_id, status, order_no).
	demoInsertCouponsSQL = `INSERT INTO user_coupon (id, user_id, status, order_no) VALUES `
	// Rows: (sku_id, available, locked). An existing SKU gets the amounts added.
	demoUpsertStockSQL  = `INSERT INTO inventory (sku_id, available, locked) VALUES `
	demoUpsertStockTail = ` ON DUPLICATE KEY UPDATE available = available + VALUES(available), locked = locked + VALUES(locked)`
)

func (store) demoExec(ctx context.Context, e sqlx.ExecerContext, stmt []byte) error {
	if _, err := e.ExecContext(ctx, string(stmt)); err != nil {
		return fmt.Errorf("insert demo rows: %w", err)
	}
	return nil
}

// demoBatchTable records what each Generate call made, so a Reset can
// tell demo rows from real ones: orders with ids in [first_order_id,
// last_order_id] whose order_no is order_no_prefix + id; coupons with ids in
// [first_coupon_id, last_coupon_id]; inventory rows of sku_id 1..skus. The
// id ranges are reserved before any row is written (see demoReserveSQL), so
// no other writer's row can fall inside them.
const demoBatchTable = "order_job_demo_batch"

// demoCreateBatchSQL creates the marker table on first use: a database
// that never saw demo data never gets it. DDL: commits implicitly.
const demoCreateBatchSQL = `CREATE TABLE IF NOT EXISTS order_job_demo_batch (
    id              BIGINT      NOT NULL AUTO_INCREMENT,
    order_no_prefix VARCHAR(40) NOT NULL,
    first_order_id  BIGINT      NOT NULL,
    last_order_id   BIGINT      NOT NULL,
    first_coupon_id BIGINT      NOT NULL,
    last_coupon_id  BIGINT      NOT NULL COMMENT 'below first_coupon_id when the batch has no coupons',
    skus            INT         NOT NULL COMMENT 'inventory rows sku_id 1..skus',
    created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// demoBatchExistsSQL tells whether the marker table exists. No locks.
const demoBatchExistsSQL = `SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'order_job_demo_batch'`

// demoDatabaseSQL names the connection's database.
const demoDatabaseSQL = `SELECT COALESCE(DATABASE(), '')`

// demoIsOrder is true for an order o (alias) that a recorded batch made.
const demoIsOrder = `EXISTS (SELECT 1 FROM order_job_demo_batch b
  WHERE o.id BETWEEN b.first_order_id AND b.last_order_id AND o.order_no = CONCAT(b.order_no_prefix, o.id))`

// demoForeignSQL finds, per table a Reset empties, one row no recorded
// batch made (its key, for the message), or nothing. Each is a plain read
// that stops at the first such row: in a real shop's database that is
// almost at once; in a database of demo rows it reads them all (seconds for
// millions). Rows of the order-keyed tables count as demo rows when their
// order is one. No locks.
var demoForeignSQL = map[string]string{
	"order_info": `SELECT o.order_no FROM order_info o WHERE NOT ` + demoIsOrder + ` LIMIT 1`,
	"user_coupon": `SELECT CAST(c.id AS CHAR) FROM user_coupon c WHERE NOT EXISTS (SELECT 1 FROM order_job_demo_batch b
  WHERE c.id BETWEEN b.first_coupon_id AND b.last_coupon_id) LIMIT 1`,
	"inventory": `SELECT CAST(i.sku_id AS CHAR) FROM inventory i
WHERE i.sku_id < 1 OR i.sku_id > (SELECT COALESCE(MAX(skus), 0) FROM order_job_demo_batch) LIMIT 1`,
}

// demoForeignByOrderSQL is demoForeignSQL of a table keyed by order_no
// (%[1]s): a row whose order is not a demo order. Probes uk_order_no once
// per row.
const demoForeignByOrderSQL = `SELECT t.order_no FROM %[1]s t
WHERE NOT EXISTS (SELECT 1 FROM order_info o WHERE o.order_no = t.order_no AND ` + demoIsOrder + `) LIMIT 1`

// demoTables are emptied by a Reset, children first.
var demoTables = []string{"order_outbox", "payment_conflict", "order_payment", "order_fulfillment_overdue", "order_close_log",
	"order_dead_letter", "order_item", "user_coupon", "inventory", "order_info"}

func (store) demoBatchExists(ctx context.Context, q sqlx.QueryerContext) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, demoBatchExistsSQL); err != nil {
		return false, fmt.Errorf("look for %s: %w", demoBatchTable, err)
	}
	return n > 0, nil
}

func (store) demoDatabase(ctx context.Context, q sqlx.QueryerContext) (string, error) {
	var name string
	if err := sqlx.GetContext(ctx, q, &name, demoDatabaseSQL); err != nil {
		return "", fmt.Errorf("read the database name: %w", err)
	}
	return name, nil
}

// demoForeign returns a key of a row of table that no recorded batch made,
// or "" when every row is a demo row. withMarker false means no batch was
// ever recorded: any row is foreign.
func (store) demoForeign(ctx context.Context, q sqlx.QueryerContext, table string, withMarker bool) (string, error) {
	query := "SELECT CAST(1 AS CHAR) FROM " + table + " LIMIT 1"
	if withMarker {
		var ok bool
		if query, ok = demoForeignSQL[table]; !ok {
			query = fmt.Sprintf(demoForeignByOrderSQL, table)
		}
	}
	key, err := sqlexec.GetOne[string](ctx, q, query)
	switch {
	case err != nil:
		return "", fmt.Errorf("look for rows demo-data did not make in %s: %w", table, err)
	case key == nil:
		return "", nil
	case !withMarker:
		return "(any)", nil
	}
	return *key, nil
}

// demoTruncateSQL empties one of demoTables or the marker table (%s). DDL:
// commits implicitly.
const demoTruncateSQL = `TRUNCATE TABLE %s`

func (store) demoReset(ctx context.Context, e sqlx.ExecerContext, withMarker bool) error {
	tables := demoTables
	if withMarker {
		tables = append(slices.Clone(tables), demoBatchTable)
	}
	for _, t := range tables {
		if _, err := e.ExecContext(ctx, fmt.Sprintf(demoTruncateSQL, t)); err != nil {
			return fmt.Errorf("reset %s: %w", t, err)
		}
	}
	return nil
}

func (store) demoCreateBatch(ctx context.Context, e sqlx.ExecerContext) error {
	if _, err := e.ExecContext(ctx, demoCreateBatchSQL); err != nil {
		return fmt.Errorf("create %s: %w", demoBatchTable, err)
	}
	return nil
}

// demoForeignStockSQL finds an inventory row among sku_id 1..? (param) that
// no recorded batch made: demo orders would add stock to it. No locks.
const demoForeignStockSQL = `SELECT sku_id FROM inventory
WHERE sku_id BETWEEN 1 AND ? AND sku_id > (SELECT COALESCE(MAX(skus), 0) FROM order_job_demo_batch)
ORDER BY sku_id LIMIT 1`

func (store) demoForeignStock(ctx context.Context, q sqlx.QueryerContext, skus int) (int64, error) {
	sku, err := sqlexec.GetOne[int64](ctx, q, demoForeignStockSQL, skus)
	switch {
	case err != nil:
		return 0, fmt.Errorf("look for inventory rows demo-data did not make: %w", err)
	case sku == nil:
		return 0, nil
	}
	return *sku, nil
}

// demoReserveSQL moves a table's AUTO_INCREMENT past the last id of a range
// demo-data is about to fill: inserting that id and rolling back leaves the
// counter above it (InnoDB never takes auto-increment values back), so
// another writer's next row lands after the range, never inside it. %s is
// order_info or user_coupon; params: the id (twice for order_info). Run in a transaction that is
// rolled back; the row is never visible to others.
var demoReserveSQL = map[string]string{
	"order_info":  `INSERT INTO order_info (id, order_no, user_id, status, create_time, timeout_minutes) VALUES (?, CONCAT('~demo-reserve-', ?), 0, 2, NOW(), 0)`,
	"user_coupon": `INSERT INTO user_coupon (id, user_id, status) VALUES (?, 0, 2)`,
}

// demoRangeUsedSQL counts rows in an id range (%s: order_info or
// user_coupon; params: first, last) through the primary key. No locks.
const demoRangeUsedSQL = `SELECT COUNT(*) FROM %s WHERE id BETWEEN ? AND ?`

func (store) demoReserve(ctx context.Context, db *sqlx.DB, table string, first, last int64) error {
	if last < first {
		return nil
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	args := []any{last}
	if table == "order_info" {
		args = append(args, last)
	}
	_, err = tx.ExecContext(ctx, demoReserveSQL[table], args...)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("reserve %s ids %d-%d: %w", table, first, last, err)
	}
	var n int
	if err := db.GetContext(ctx, &n, fmt.Sprintf(demoRangeUsedSQL, table), first, last); err != nil {
		return fmt.Errorf("check %s ids %d-%d: %w", table, first, last, err)
	}
	if n > 0 {
		return fmt.Errorf("%d rows appeared in %s ids %d-%d while demo-data reserved them (another writer?); run it again", n, table, first, last)
	}
	return nil
}

// demoRecordBatchSQL records a batch before its rows are written (a batch
// cut short still marks its rows).
const demoRecordBatchSQL = `INSERT INTO order_job_demo_batch
(order_no_prefix, first_order_id, last_order_id, first_coupon_id, last_coupon_id, skus)
VALUES (:order_no_prefix, :first_order_id, :last_order_id, :first_coupon_id, :last_coupon_id, :skus)`

// demoBatch is demoRecordBatchSQL's row.
type demoBatch struct {
	Prefix      string `db:"order_no_prefix"`
	FirstOrder  int64  `db:"first_order_id"`
	LastOrder   int64  `db:"last_order_id"`
	FirstCoupon int64  `db:"first_coupon_id"`
	LastCoupon  int64  `db:"last_coupon_id"`
	SKUs        int    `db:"skus"`
}

func (store) demoRecordBatch(ctx context.Context, e sqlx.ExecerContext, prefix string, firstOrder, lastOrder, firstCoupon, lastCoupon int64, skus int) error {
	b := demoBatch{Prefix: prefix, FirstOrder: firstOrder, LastOrder: lastOrder, FirstCoupon: firstCoupon, LastCoupon: lastCoupon, SKUs: skus}
	if _, err := sqlexec.ExecNamed(ctx, e, demoRecordBatchSQL, b); err != nil {
		return fmt.Errorf("record the demo batch: %w", err)
	}
	return nil
}

// demoSplitSQL copies the orders of one residue of id, and their lines,
// into tables of order_info's and order_item's shape (%[1]s the orders',
// %[2]s the lines'; both checked names made by SplitTables).
var demoSplitSQL = []string{
	`CREATE TABLE IF NOT EXISTS %[1]s LIKE order_info`,
	`CREATE TABLE IF NOT EXISTS %[2]s LIKE order_item`,
	`INSERT INTO %[1]s SELECT * FROM order_info WHERE id %% :n = :k`,
	`INSERT INTO %[2]s SELECT it.* FROM order_item it JOIN %[1]s o ON o.order_no = it.order_no`,
}

func (store) splitInto(ctx context.Context, e sqlx.ExtContext, orders, items string, k, n int) error {
	for _, q := range demoSplitSQL {
		if _, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(q, orders, items), map[string]any{"k": k, "n": n}); err != nil {
			return fmt.Errorf("split orders into %s: %w", orders, err)
		}
	}
	return nil
}

// demoSplitEmptySQL empties the tables SplitTables moved everything out
// of.
var demoSplitEmptySQL = []string{`DELETE FROM order_item`, `DELETE FROM order_info`}

func (store) splitEmpty(ctx context.Context, e sqlx.ExecerContext) error {
	for _, q := range demoSplitEmptySQL {
		if _, err := e.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("split orders: %w", err)
		}
	}
	return nil
}
