package orders

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
)

// This file holds the coupons whose used rows are copies of one coupon
// (schema.Coupon.AnyCopy, macrozheng/mall's coupon history): the rows
// matching an order are interchangeable, so a close gives back one of
// them, and the orders of one match key closing together get distinct
// ones. The copies are locked where the close locks coupons (after the
// stock) and the choice is made under that lock, so two closes of one
// key, in one transaction or in several, never give back the same copy
// twice: the later one finds it unused.

// assignCopies locks the used copies matching the orders of cands that
// have a coupon (closesql.Coupon.Lock) and gives each order a distinct
// one: the orders in ascending id, each the lowest copy id no order before
// it took. It returns each served order's copy (by order id; an order that
// found every matching copy taken is absent) and how many used copies
// match each order.
func (c *Closer) assignCopies(ctx context.Context, q sqlx.QueryerContext, cands []*candidate) (copies, matched map[int64]int64, err error) {
	var ids []int64
	for _, cd := range cands {
		if cd.CouponID.Valid {
			ids = append(ids, cd.CouponID.Int64) // by match: the order's id
		}
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	slices.Sort(ids)
	rows, err := c.store.lockCoupons(ctx, q, slices.Compact(ids))
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(rows, func(a, b couponRow) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Copy, b.Copy)) })
	copies, matched = map[int64]int64{}, map[int64]int64{}
	taken := map[int64]bool{}
	for _, r := range rows {
		matched[r.ID]++
		if _, served := copies[r.ID]; served || taken[r.Copy] {
			continue
		}
		copies[r.ID], taken[r.Copy] = r.Copy, true
	}
	return copies, matched, nil
}

// validateCouponCopies is validateCoupons for copies: the orders not set
// aside yet get their copies (assignCopies); an order left without one is
// as an order matching no used row: no coupon with Optional, else set
// aside.
func (c *Closer) validateCouponCopies(ctx context.Context, tx *sqlx.Tx, cands []*candidate, bad map[string]error, markBad func(*candidate, string)) error {
	live := keep(cands, bad)
	copies, matched, err := c.assignCopies(ctx, tx, live)
	if err != nil {
		return err
	}
	table := c.store.sql().Schema.Coupon.Table
	for _, cd := range live {
		if !cd.CouponID.Valid {
			continue
		}
		id := cd.CouponID.Int64
		switch _, served := copies[id]; {
		case served:
		case c.store.sql().Coupon.Optional:
			cd.CouponID.Valid = false // as an order matching no used row
		case matched[id] == 0:
			markBad(cd, fmt.Sprintf("0 used rows of %s match the order", table))
		default:
			markBad(cd, fmt.Sprintf("%d used rows of %s match the order, each taken by an order before it in this close", matched[id], table))
		}
	}
	return nil
}

// restoreCopies gives back one copy for each order of good with a coupon
// (assignCopies), in one statement by the copies' ids, each still used.
// An order left without a copy, or a copy not changed, is unexpected.
func (c *Closer) restoreCopies(ctx context.Context, tx *sqlx.Tx, good []*candidate, unexpected func(string, int64, int64) error) error {
	var want int64
	for _, cd := range good {
		if cd.CouponID.Valid {
			want++
		}
	}
	if want == 0 {
		return nil
	}
	copies, _, err := c.assignCopies(ctx, tx, good)
	if err != nil {
		return err
	}
	if int64(len(copies)) != want {
		return unexpected("find a used copy of each order's coupon", want, int64(len(copies)))
	}
	ids := make([]int64, 0, len(copies))
	for _, id := range copies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	n, err := c.store.restoreCoupons(ctx, tx, ids, nil)
	if err != nil {
		return err
	}
	if n != want {
		return unexpected("restore coupons", want, n)
	}
	return nil
}
