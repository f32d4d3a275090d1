package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// The two baselines the close path is compared with. Their SQL lives here,
// not in package orders: they are what orders replaces.

// naiveCloseSQL is the naive "close": one bulk status UPDATE. It restores no
// stock and no coupon and logs nothing, so its invariant check fails by
// design; it is the upper bound of what touching the rows costs.
const naiveCloseSQL = `UPDATE order_info SET status = 2 WHERE status = 0 AND create_time < NOW() - INTERVAL 30 MINUTE`

func naiveClose(ctx context.Context, db *sqlx.DB) (int, time.Duration, error) {
	start := time.Now()
	res, err := db.ExecContext(ctx, naiveCloseSQL)
	if err != nil {
		return 0, 0, fmt.Errorf("naive update: %w", err)
	}
	elapsed := time.Since(start)
	n, err := res.RowsAffected()
	return int(n), elapsed, err
}

// The one-by-one approach the close path replaces: select every timed-out
// order, then one by one take a blocking redsync lock on order:close:{orderNo}, re-read
// the order, close it in one transaction (status CAS, stock released per
// item in item order, coupon restored, close logged) and unlock.
const (
	// seedSelectTimeoutSQL selects every timed-out order at once.
	seedSelectTimeoutSQL = `SELECT order_no FROM order_info WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= NOW()`
	// seedReadSQL re-reads one order under its lock.
	seedReadSQL  = `SELECT id, status, coupon_id FROM order_info WHERE order_no = ?`
	seedCloseSQL = `UPDATE order_info SET status = 2, close_time = NOW(3), close_reason = 'payment_timeout' WHERE id = ? AND status = 0`
	seedItemsSQL = `SELECT sku_id, quantity FROM order_item WHERE order_no = ?`
	// seedReleaseSQL releases one item's stock.
	seedReleaseSQL = `UPDATE inventory SET available = available + ?, locked = locked - ? WHERE sku_id = ? AND locked >= ?`
	seedCouponSQL  = `UPDATE user_coupon SET status = 0, order_no = NULL WHERE id = ? AND status = 1 AND order_no = ?`
	seedLogSQL     = `INSERT INTO order_close_log (order_no, closed_at, reason) VALUES (?, NOW(3), 'payment_timeout')`
)

// seedClose runs the one-by-one approach with one worker for budget and returns the
// orders closed and the time spent closing them (the initial select of all
// timed-out orders is not counted).
func seedClose(ctx context.Context, db *sqlx.DB, rs *redsync.Redsync, prefix string, budget time.Duration) (int, time.Duration, error) {
	var nos []string
	if err := db.SelectContext(ctx, &nos, seedSelectTimeoutSQL); err != nil {
		return 0, 0, fmt.Errorf("seed: select timeout orders: %w", err)
	}
	start := time.Now()
	closed := 0
	for _, no := range nos {
		if time.Since(start) >= budget || ctx.Err() != nil {
			break
		}
		ok, err := seedCloseOne(ctx, db, rs, prefix, no)
		if err != nil {
			return closed, time.Since(start), err
		}
		if ok {
			closed++
		}
	}
	return closed, time.Since(start), nil //nolint:nilerr // a cancelled context ends the measurement, not the bench
}

func seedCloseOne(ctx context.Context, db *sqlx.DB, rs *redsync.Redsync, prefix, no string) (bool, error) {
	// tryLock(3, 10, SECONDS): wait up to ~3s, lease 10s.
	m := rs.NewMutex(prefix+"order:close:"+no, redsync.WithExpiry(10*time.Second), redsync.WithTries(20),
		redsync.WithRetryDelay(150*time.Millisecond))
	if err := m.LockContext(ctx); err != nil {
		return false, nil // someone else has it
	}
	defer m.UnlockContext(context.WithoutCancel(ctx)) //nolint:errcheck // lease expires anyway

	type order struct {
		ID       int64         `db:"id"`
		Status   int           `db:"status"`
		CouponID sql.NullInt64 `db:"coupon_id"`
	}
	o, err := sqlexec.GetOne[order](ctx, db, seedReadSQL, no)
	if err != nil {
		return false, err
	}
	if o == nil || o.Status != 0 {
		return false, nil
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, seedCloseSQL, o.ID)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	var items []struct {
		SKU int64 `db:"sku_id"`
		Qty int64 `db:"quantity"`
	}
	if err := tx.SelectContext(ctx, &items, seedItemsSQL, no); err != nil {
		return false, err
	}
	for _, it := range items {
		res, err := tx.ExecContext(ctx, seedReleaseSQL, it.Qty, it.Qty, it.SKU, it.Qty)
		if err != nil {
			return false, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return false, fmt.Errorf("seed: order %s: stock of sku %d not released", no, it.SKU)
		}
	}
	if o.CouponID.Valid {
		if _, err := tx.ExecContext(ctx, seedCouponSQL, o.CouponID.Int64, no); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, seedLogSQL, no); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
