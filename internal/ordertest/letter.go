package ordertest

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/orderstatus"
)

// DeadLetter writes a waiting close dead letter of orderNo, due a minute
// ago, naming its order table (empty: a letter written before migration
// 0138), and returns orderNo.
func DeadLetter(t testing.TB, db *sqlx.DB, orderNo, table string) string {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), `INSERT INTO order_dead_letter
		(order_no, stage, status, last_error, attempts, next_retry_at, order_table)
		VALUES (?, 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE, ?)`, orderNo, table); err != nil {
		t.Fatalf("ordertest: dead letter of %s: %v", orderNo, err)
	}
	return orderNo
}

// Letters plants dead letters in every status, ids ascending in this
// order: W-1 waiting, P-1 parked, R-1 resolved, W-2 waiting (close stage)
// and W-1 waiting (payment stage), for the operators' views' tests.
func Letters(t testing.TB, db *sqlx.DB) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), `INSERT INTO order_dead_letter
		(order_no, stage, status, status_reason, last_error, attempts, next_retry_at) VALUES
		('W-1', 'close', 'waiting', '', 'close order W-1: inventory row of sku 5 is missing', 2, NOW(3) + INTERVAL 1 HOUR),
		('P-1', 'close', 'parked', 'parked after 8 failed attempts (maximum 8); see last_error', 'boom', 8, NOW(3) - INTERVAL 1 DAY),
		('R-1', 'close', 'resolved', 'order is paid; nothing to close', 'old', 1, NOW(3) - INTERVAL 2 DAY),
		('W-2', 'close', 'waiting', '', 'close order W-2: coupon 9 is status 2', 1, NOW(3) + INTERVAL 5 MINUTE),
		('W-1', 'payment', 'waiting', '', 'trade close timed out', 1, NOW(3))`); err != nil {
		t.Fatalf("ordertest: plant dead letters: %v", err)
	}
}

// Unpaid is the number of an unpaid order of table: the first by id, or
// the last.
func Unpaid(t testing.TB, db *sqlx.DB, table string, last bool) string {
	t.Helper()
	order := "ASC"
	if last {
		order = "DESC"
	}
	var no string
	if err := db.GetContext(context.Background(), &no,
		"SELECT order_no FROM "+table+" WHERE status = ? ORDER BY id "+order+" LIMIT 1", orderstatus.Unpaid); err != nil {
		t.Fatalf("ordertest: an unpaid order of %s: %v", table, err)
	}
	return no
}
