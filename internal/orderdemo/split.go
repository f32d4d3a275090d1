package orderdemo

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// MaxSplit bounds SplitTables' n.
const MaxSplit = 256

// SplitTables moves every order of db's order_info, with its lines, into
// n tables order_info_0 ... order_info_{n-1} and order_item_0 ... (made
// LIKE order_info and order_item when missing): order id goes to table
// id % n. The stock and coupon rows stay where they are, shared by the
// tables, so what a close of every table gives back is what a close of
// order_info would have. It is how a test or a bench lays out orders
// split over tables (order.sources: order_info_{0..n-1}). Returns the
// order tables' names. Not for a shop's data: it empties order_info.
func SplitTables(ctx context.Context, db *sqlx.DB, n int) ([]string, error) {
	if n < 1 || n > MaxSplit {
		return nil, fmt.Errorf("orderdemo: split into %d tables: want 1..%d", n, MaxSplit)
	}
	var tables []string
	for k := range n {
		orders, items := fmt.Sprintf("order_info_%d", k), fmt.Sprintf("order_item_%d", k)
		if err := (store{}).splitInto(ctx, db, orders, items, k, n); err != nil {
			return nil, err
		}
		tables = append(tables, orders)
	}
	if err := (store{}).splitEmpty(ctx, db); err != nil {
		return nil, err
	}
	return tables, nil
}
