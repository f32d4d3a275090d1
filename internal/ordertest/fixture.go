package ordertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// OrderOpts describe the one order a test needs. Zero values take the
// defaults given.
type OrderOpts struct {
	// OrderNo is the order's number. Required.
	OrderNo string
	// UserID owns the order and its coupon. Default 7.
	UserID int64
	// Status is order_info.status: 0 unpaid (default), 1 paid, 2 closed
	// (with its close time, reason and close-log row), 3 shipped, 4
	// completed.
	Status int
	// Age places the order this long before the database's clock
	// (create_time = NOW() - Age); with TimeoutMinutes it says whether the
	// order is due. Default 0: placed now.
	Age time.Duration
	// TimeoutMinutes is the order's own payment timeout. Default 30.
	TimeoutMinutes int
	// Items are the order's lines. Each SKU gets an inventory row with
	// Stock available if it has none (unless its line is MissingStock);
	// the order then takes its quantities from it as its status says:
	// locked while unpaid (as placing does), consumed once paid, given back
	// when closed.
	Items []Item
	// Stock is the available quantity of the inventory rows made for
	// Items, before the order takes its own. Default 100.
	Stock int64
	// Coupon gives the order a coupon of its user, held as its status
	// says: locked (1) by an unpaid order, used (2) by a paid one, unused
	// and unlinked for a closed one.
	Coupon bool
}

// Item is one order line.
type Item struct {
	SKU int64
	Qty int64
	// MissingStock leaves the SKU without an inventory row, so closing
	// the order fails on it (a poisoned order) until Restock makes the row.
	MissingStock bool
}

// Placed is the order Order inserted.
type Placed struct {
	ID       int64
	OrderNo  string
	CouponID int64 // 0 without one
}

// Order inserts the one order opts describe, with its items, stock rows
// and coupon, in one transaction, and fails t if it cannot: an exact row
// for a test about that order, where demo data (internal/orderdemo) is
// statistical.
func Order(t testing.TB, db *sqlx.DB, opts OrderOpts) Placed {
	t.Helper()
	o, err := insertOrder(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("ordertest: order %s: %v", opts.OrderNo, err)
	}
	return o
}

func insertOrder(ctx context.Context, db *sqlx.DB, opts OrderOpts) (o Placed, err error) {
	if opts.OrderNo == "" {
		return o, fmt.Errorf("an order needs a number")
	}
	if opts.UserID == 0 {
		opts.UserID = 7
	}
	if opts.TimeoutMinutes == 0 {
		opts.TimeoutMinutes = 30
	}
	if opts.Stock == 0 {
		opts.Stock = 100
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return o, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	o.OrderNo = opts.OrderNo
	if opts.Coupon {
		if o.CouponID, err = insertCoupon(ctx, tx, opts); err != nil {
			return o, err
		}
	}
	var coupon any
	if o.CouponID != 0 {
		coupon = o.CouponID
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes, coupon_id)
		VALUES (?, ?, ?, NOW() - INTERVAL ? MICROSECOND, ?, ?)`,
		opts.OrderNo, opts.UserID, opts.Status, opts.Age.Microseconds(), opts.TimeoutMinutes, coupon)
	if err != nil {
		return o, fmt.Errorf("order_info: %w", err)
	}
	if o.ID, err = res.LastInsertId(); err != nil {
		return o, err
	}
	if opts.Status == 2 {
		if err := markClosed(ctx, tx, o.ID, opts.OrderNo); err != nil {
			return o, err
		}
	}
	if err := insertItems(ctx, tx, opts); err != nil {
		return o, err
	}
	return o, tx.Commit()
}

// insertCoupon inserts the order's coupon, locked by an unpaid order, used
// by a paid one, given back by a closed one.
func insertCoupon(ctx context.Context, tx *sqlx.Tx, opts OrderOpts) (int64, error) {
	status, couponOrder := 0, any(nil) // closed: given back
	switch opts.Status {
	case 0:
		status, couponOrder = 1, opts.OrderNo
	case 1, 3, 4:
		status, couponOrder = 2, opts.OrderNo
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO user_coupon (user_id, status, order_no) VALUES (?, ?, ?)`,
		opts.UserID, status, couponOrder)
	if err != nil {
		return 0, fmt.Errorf("coupon: %w", err)
	}
	return res.LastInsertId()
}

// markClosed leaves the order as the close transaction does: its time, its
// reason, one close-log row.
func markClosed(ctx context.Context, tx *sqlx.Tx, id int64, orderNo string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE order_info SET close_time = NOW(), close_reason = 'payment_timeout' WHERE id = ?`, id); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES (?, NOW(3), 'payment_timeout')`,
		orderNo); err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

// insertItems inserts the order's items and their stock rows (but for
// MissingStock), and takes the units the order's status holds.
func insertItems(ctx context.Context, tx *sqlx.Tx, opts OrderOpts) error {
	for _, it := range opts.Items {
		if _, err := tx.ExecContext(ctx, `INSERT INTO order_item (order_no, sku_id, quantity) VALUES (?, ?, ?)`,
			opts.OrderNo, it.SKU, it.Qty); err != nil {
			return fmt.Errorf("item of sku %d: %w", it.SKU, err)
		}
		if it.MissingStock {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO inventory (sku_id, available, locked) VALUES (?, ?, 0)`,
			it.SKU, opts.Stock); err != nil {
			return fmt.Errorf("stock of sku %d: %w", it.SKU, err)
		}
		var lock, take int64 // closed (2): nothing held
		switch opts.Status {
		case 0:
			lock, take = it.Qty, it.Qty
		case 1, 3, 4:
			take = it.Qty
		}
		if _, err := tx.ExecContext(ctx, `UPDATE inventory SET available = available - ?, locked = locked + ? WHERE sku_id = ?`,
			take, lock, it.SKU); err != nil {
			return fmt.Errorf("take stock of sku %d: %w", it.SKU, err)
		}
	}
	return nil
}

// Restock gives sku the inventory row an order's MissingStock line left it
// without: available units free, and locked what the unpaid orders' lines
// on it hold, as if the row had been there when they were placed. A test
// of a poisoned order calls it to repair the order's data.
func Restock(t testing.TB, db *sqlx.DB, sku, available int64) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), `INSERT INTO inventory (sku_id, available, locked)
		SELECT ?, ?, COALESCE(SUM(it.quantity), 0)
		FROM order_item it JOIN order_info o ON o.order_no = it.order_no
		WHERE it.sku_id = ? AND o.status = 0`, sku, available, sku); err != nil {
		t.Fatalf("ordertest: restock sku %d: %v", sku, err)
	}
}
