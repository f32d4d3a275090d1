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
