package coupon

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This package's statements are closesql.Coupon's, rendered from the
// shop's schema: each is documented there (parameters, locks, rows).

// row is one locked coupon: by id, its id, status (as text) and the order
// using it; by match, the id of the order it matches (and with AnyCopy,
// the copy's own id).
type row struct {
	ID      int64          `db:"id"`
	Status  string         `db:"status"`
	OrderNo sql.NullString `db:"order_no"`
	Copy    int64          `db:"copy_id"`
}

// lock runs st.Lock for ids (coupon ids; by match, order ids). The rows
// come in the statement's order.
func lock(ctx context.Context, q sqlx.QueryerContext, st *closesql.Coupon, ids []int64) ([]row, error) {
	var rows []row
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(st.Lock, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("lock %d coupons: %w", len(ids), err)
	}
	return rows, nil
}

// restore runs st.Restore for ids (coupon ids; by match, order ids; with
// AnyCopy, copy ids) of orders (by id, each order's coupon paired with
// its number, when the coupon names its order).
func restore(ctx context.Context, e sqlx.ExtContext, st *closesql.Coupon, ids []int64, orders []Order) (int64, error) {
	couponIDs, nos := make([]int64, len(orders)), make([]string, len(orders))
	for i, o := range orders {
		couponIDs[i], nos[i] = o.Key, o.No
	}
	res, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(st.Restore, sqlexec.IntList(ids)), map[string]any{"coupon_ids": couponIDs, "order_nos": nos})
	if err != nil {
		return 0, fmt.Errorf("restore %d coupons: %w", len(ids), err)
	}
	return res.RowsAffected()
}
