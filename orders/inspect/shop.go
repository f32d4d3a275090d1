package inspect

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/schema"
)

// This file reads an order of a declared shop schema (order.schema.table):
// the shop's own order, item, stock and coupon tables, through the
// statements closesql renders from the same schema as the close's.

// ShopOrder is an order of a declared shop schema: what the schema names
// of its row, its lines, and in local compensation mode its stock and
// coupon rows. Schema says which columns it names; the others are NULL
// here and left out of the page.
type ShopOrder struct {
	Schema  schema.Schema
	Row     ShopRow
	Items   []ShopItem
	Stock   []ShopStock  // in local mode, with a stock table
	Coupons []ShopCoupon // in local mode, for an order with a coupon
}

// ShopRow is the order row, by the names the schema gives its columns.
// Times are the database session's wall clock.
type ShopRow struct {
	ID             int64          `db:"id"`
	OrderNo        string         `db:"order_no"`
	User           sql.NullString `db:"user_id"`
	Status         string         `db:"status"`
	CreateTime     time.Time      `db:"create_time"`
	TimeoutMinutes int            `db:"timeout_minutes"`
	CloseTime      sql.NullTime   `db:"close_time"`
	CloseReason    sql.NullString `db:"close_reason"`
	UpdateTime     sql.NullTime   `db:"update_time"`
	// Coupon is the order's coupon as the close knows it: the coupon row's
	// id, or with a matched coupon the order's id (NULL: no coupon).
	Coupon sql.NullString `db:"coupon_id"`
	// SoftDelete is the soft-delete column's value and SoftDeleteLive
	// whether the close takes the row as live; both read only when the
	// schema declares a soft delete (schema.SoftDelete).
	SoftDelete     sql.NullString `db:"soft_delete"`
	SoftDeleteLive bool           `db:"soft_delete_live"`
}

// ShopItem is one order line.
type ShopItem struct {
	SKU      string `db:"sku_id"`
	Quantity string `db:"quantity"`
}

// ShopStock is the stock row of one key: the declared columns' values, in
// the schema's order.
type ShopStock struct {
	Key    string
	Values []string
}

// ShopCoupon is a coupon row of the order.
type ShopCoupon struct {
	ID      sql.NullString `db:"id"` // NULL with a matched coupon
	Status  string         `db:"status"`
	OrderNo sql.NullString `db:"order_no"`
}

// Deadline is when the order falls due: its create time plus its timeout.
func (o *ShopOrder) Deadline() time.Time { return deadline(o.Row.CreateTime, o.Row.TimeoutMinutes) }

// StatusName names the order's status by the schema's unpaid and closed
// values; "" for any other.
func (o *ShopOrder) StatusName() string {
	switch o.Row.Status {
	case o.Schema.Orders.Unpaid.String():
		return "unpaid"
	case o.Schema.Orders.Closed.String():
		return "closed"
	}
	return ""
}

// SoftDeleted reports whether the schema declares a soft delete and the
// order is deleted by it: the close never closes such an order.
func (o *ShopOrder) SoftDeleted() bool {
	return o.Schema.Orders.SoftDelete.Declared() && !o.Row.SoftDeleteLive
}

// CouponStatusName names a coupon's status by the schema's used and
// unused values; "" for any other.
func (o *ShopOrder) CouponStatusName(c ShopCoupon) string {
	switch c.Status {
	case o.Schema.Coupon.Used.String():
		return "used"
	case o.Schema.Coupon.Unused.String():
		return "unused"
	}
	return ""
}

// StockOf returns the stock row of a line's SKU, nil when there is none.
func (o *ShopOrder) StockOf(sku string) *ShopStock {
	for k := range o.Stock {
		if o.Stock[k].Key == sku {
			return &o.Stock[k]
		}
	}
	return nil
}

// renderShopTable renders the view's statements for a declared schema's
// order table (s already following it: schema.ForTable).
func renderShopTable(s schema.Schema) (table, error) {
	v, err := closesql.RenderView(s)
	if err != nil {
		return table{}, err
	}
	return table{name: s.Orders.Table, shop: v, schema: s}, nil
}

// shopOrder reads what a declared schema's tables hold of the order in row.
func (i *View) shopOrder(ctx context.Context, t table, row *ShopRow) (*ShopOrder, error) {
	o := &ShopOrder{Schema: t.schema, Row: *row}
	var key any = row.OrderNo
	if t.schema.Items.ByID {
		key = row.ID
	}
	if err := sqlx.SelectContext(ctx, i.db, &o.Items, t.shop.Items, key); err != nil {
		return nil, fmt.Errorf("read items of %s: %w", row.OrderNo, err)
	}
	if i.mode != orders.CompensateLocal {
		return o, nil
	}
	var err error
	if o.Stock, err = i.shopStock(ctx, t, o.Items); err != nil {
		return nil, fmt.Errorf("read stock of %s: %w", row.OrderNo, err)
	}
	if t.shop.Coupon != "" && row.Coupon.Valid {
		if err := sqlx.SelectContext(ctx, i.db, &o.Coupons, t.shop.Coupon, row.Coupon.String); err != nil {
			return nil, fmt.Errorf("read coupon of %s: %w", row.OrderNo, err)
		}
	}
	return o, nil
}

// shopStock reads the stock rows of the lines' SKUs.
func (i *View) shopStock(ctx context.Context, t table, items []ShopItem) ([]ShopStock, error) {
	skus := map[string]bool{}
	for _, it := range items {
		skus[it.SKU] = true
	}
	if t.shop.Stock == "" || len(skus) == 0 {
		return nil, nil
	}
	query, args, err := sqlx.In(t.shop.Stock, slices.Sorted(maps.Keys(skus)))
	if err != nil {
		return nil, err
	}
	rows, err := i.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ShopStock
	for rows.Next() {
		vals := make([]sql.NullString, 1+len(t.schema.Stock.Columns))
		ptrs := make([]any, len(vals))
		for k := range vals {
			ptrs[k] = &vals[k]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		s := ShopStock{Key: vals[0].String}
		for _, v := range vals[1:] {
			s.Values = append(s.Values, v.String)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
