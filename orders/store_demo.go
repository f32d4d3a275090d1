package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// This file holds the demo generator's SQL. The generator renders rows as
// literals (numbers, timestamps and order numbers it made itself, checked to
// be [A-Za-z0-9_-]) into multi-row INSERTs of a few thousand rows each.

// demoTables are emptied by a Reset, children first.
var demoTables = []string{"order_fulfillment_overdue", "order_close_log", "order_dead_letter", "order_item", "user_coupon", "inventory", "order_info"}

// demoTruncateSQL empties one of demoTables (%s). DDL: commits implicitly.
const demoTruncateSQL = `TRUNCATE TABLE %s`

func (store) demoReset(ctx context.Context, e sqlx.ExecerContext) error {
	for _, t := range demoTables {
		if _, err := e.ExecContext(ctx, fmt.Sprintf(demoTruncateSQL, t)); err != nil {
			return fmt.Errorf("reset %s: %w", t, err)
		}
	}
	return nil
}

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
