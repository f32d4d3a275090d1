package orders

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/coupon"
)

// This file holds what a close gives back that depends on the schema (see
// closesql.Render): the lines by the order key the item table uses, the checks
// of stock rows and coupons before a checked close, and the per-order
// amounts of schema.Schema.Extra (loyalty points and the like).

// itemKey is the key r's lines carry: its number, or its id as text.
func (c *Closer) itemKey(r scanRow) string {
	if c.store.sql().ItemsByID {
		return strconv.FormatInt(r.ID, 10)
	}
	return r.OrderNo
}

// readItems reads the lines of rows, by itemKey, in one statement.
func (c *Closer) readItems(ctx context.Context, q sqlx.QueryerContext, rows []scanRow) (map[string][]itemRow, error) {
	var keys any
	if c.store.sql().ItemsByID {
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		keys = ids
	} else {
		keys = orderNos(rows)
	}
	items, err := c.store.orderItems(ctx, q, keys)
	if err != nil {
		return nil, err
	}
	by := make(map[string][]itemRow, len(rows))
	for _, it := range items {
		by[it.OrderNo] = append(by[it.OrderNo], it)
	}
	return by, nil
}

// validateStock locks the candidates' stock rows (ascending key) and marks
// the orders with a line whose stock row is missing, and every order on a
// SKU whose summed quantity exceeds a subtracted column (one by one they
// close until the column runs out, and the rest are dead-lettered).
// Removing them only lowers other SKUs' sums, so one pass settles it.
func (c *Closer) validateStock(ctx context.Context, tx *sqlx.Tx, cands []*candidate, bad map[string]error, markBad func(*candidate, string)) error {
	st := c.store.sql().Stock
	if st == nil {
		return nil
	}
	skuSet := map[int64]bool{}
	for _, cd := range cands {
		for _, it := range cd.items {
			skuSet[it.SKUID] = true
		}
	}
	if len(skuSet) == 0 {
		return nil
	}
	rows, err := c.store.lockStock(ctx, tx, sortedKeys(skuSet))
	if err != nil {
		return err
	}
	stock := make(map[int64]stockRow, len(rows))
	for _, s := range rows {
		stock[s.SKUID] = s
	}
	sch := c.store.sql().Schema.Stock
	for _, cd := range cands {
		for _, it := range cd.items {
			if _, ok := stock[it.SKUID]; !ok {
				markBad(cd, fmt.Sprintf("%s row of sku %d is missing", sch.Table, it.SKUID))
			}
		}
	}
	good := keep(cands, bad)
	for _, d := range sumDeltas(good) {
		s, ok := stock[d.SKUID]
		if !ok {
			continue
		}
		for _, i := range st.Subtract {
			if s.cols[i] >= d.Qty {
				continue
			}
			for _, cd := range good {
				if slices.ContainsFunc(cd.items, func(it itemRow) bool { return it.SKUID == d.SKUID }) {
					markBad(cd, fmt.Sprintf("%s stock of sku %d is %d, below the %d to release",
						sch.Columns[i].Name, d.SKUID, s.cols[i], d.Qty))
				}
			}
		}
	}
	return nil
}

// validateCoupons locks the coupons of cands (after the stock; with
// copies, of those not set aside yet) and, as coupon.Validate judges each,
// sets the order aside or takes its coupon away (no coupon to give back).
func (c *Closer) validateCoupons(ctx context.Context, tx *sqlx.Tx, cands []*candidate, bad map[string]error, markBad func(*candidate, string)) error {
	cs := c.store.sql().Coupon
	if cs != nil && cs.AnyCopy {
		cands = keep(cands, bad)
	}
	with, orders := couponOrders(cands)
	verdicts, err := coupon.Validate(ctx, tx, cs, orders)
	if err != nil {
		return err
	}
	for i, v := range verdicts {
		switch {
		case v.Drop:
			with[i].CouponID.Valid = false
		case v.Reason != "":
			markBad(with[i], v.Reason)
		}
	}
	return nil
}

// couponOrders returns the orders of cands that have a coupon, as they
// are and as package coupon takes them.
func couponOrders(cands []*candidate) (with []*candidate, orders []coupon.Order) {
	for _, cd := range cands {
		if cd.CouponID.Valid {
			with = append(with, cd)
			orders = append(orders, coupon.Order{No: cd.OrderNo, Key: cd.CouponID.Int64})
		}
	}
	return with, orders
}

// giveBackExtra gives back the per-order amounts of the closed orders ids
// (their rows locked by this transaction's status CAS): one read of every
// giveback's amount and key, then per giveback one statement adding each
// key's summed amount, in ascending key order. Orders whose amount or key
// is NULL, or whose amount is 0, give nothing. A key whose row is missing
// changes fewer rows than expected: unexpected says what that means in the
// kind of close transaction (see writeClose).
func (c *Closer) giveBackExtra(ctx context.Context, tx *sqlx.Tx, ids []int64, unexpected func(string, int64, int64) error) error {
	g := c.store.sql().Extra
	if g == nil {
		return nil
	}
	sums, err := c.store.givebackAmounts(ctx, tx, ids, len(g.Add))
	if err != nil {
		return err
	}
	for i, stmt := range g.Add {
		deltas := make([]skuDelta, 0, len(sums[i]))
		for _, k := range sortedKeys(sums[i]) {
			if sums[i][k] != 0 { // amounts that cancel out change nothing, and no row would count as changed
				deltas = append(deltas, skuDelta{SKUID: k, Qty: sums[i][k]})
			}
		}
		if len(deltas) == 0 {
			continue
		}
		res, err := tx.ExecContext(ctx, fmt.Sprintf(stmt, deltaCaseOn(g.Key[i], deltas), deltaSKUs(deltas)))
		if err != nil {
			return fmt.Errorf("give back %s for %d orders: %w", c.store.sql().Schema.Extra[i], len(ids), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != int64(len(deltas)) {
			return unexpected(fmt.Sprintf("give back %s", c.store.sql().Schema.Extra[i]), int64(len(deltas)), n)
		}
	}
	return nil
}

// givebackAmounts runs closesql.Givebacks.Read for ids and sums, per giveback (n
// of them), each key's non-zero amounts.
func (s store) givebackAmounts(ctx context.Context, q sqlx.QueryerContext, ids []int64, n int) ([]map[int64]int64, error) {
	rs, err := q.QueryContext(ctx, fmt.Sprintf(s.sql().Extra.Read, sqlexec.IntList(ids)))
	if err != nil {
		return nil, fmt.Errorf("read the givebacks of %d orders: %w", len(ids), err)
	}
	defer rs.Close()
	sums := make([]map[int64]int64, n)
	for i := range sums {
		sums[i] = map[int64]int64{}
	}
	vals := make([]sql.NullInt64, 1+2*n)
	dst := make([]any, len(vals))
	for i := range vals {
		dst[i] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(dst...); err != nil {
			return nil, fmt.Errorf("read the givebacks of %d orders: %w", len(ids), err)
		}
		for i := range n {
			amount, key := vals[1+2*i], vals[2+2*i]
			if amount.Valid && key.Valid && amount.Int64 != 0 {
				sums[i][key.Int64] += amount.Int64
			}
		}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read the givebacks of %d orders: %w", len(ids), err)
	}
	return sums, nil
}
