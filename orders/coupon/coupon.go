package coupon

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/orderjob/executor/orders/closesql"
)

// Order is an order of the close that has a coupon.
type Order struct {
	No  string // the order's number
	Key int64  // its coupon's id; by match, the order's own id
}

// Verdict is what the locked rows say of one order's coupon. The zero
// value: the coupon is as a close expects.
type Verdict struct {
	Drop   bool   // the order has no coupon (by match, Optional, no row): nothing to give back
	Reason string // the coupon is not as a close expects: set the order aside, for this reason
}

// keys returns the orders' keys, ascending, each once.
func keys(orders []Order) []int64 {
	ids := make([]int64, len(orders))
	for i, o := range orders {
		ids[i] = o.Key
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// check judges each of orders (by id, or by match without copies) from
// rows, the locked coupons: by id, missing or not used (by this order, when
// the coupon names it); by match, not exactly one used row matching the
// order (none is no coupon with Optional).
func check(st *closesql.Coupon, orders []Order, rows []row) []Verdict {
	found := map[int64][]row{}
	for _, r := range rows {
		found[r.ID] = append(found[r.ID], r)
	}
	out := make([]Verdict, len(orders))
	for i, o := range orders {
		cps := found[o.Key]
		switch {
		case st.ByMatch && st.Optional && len(cps) == 0:
			// No coupon: the close gives none back. The page's fast close
			// expected a row for every order and fell back to this one.
			out[i].Drop = true
		case st.ByMatch && len(cps) != 1:
			out[i].Reason = fmt.Sprintf("%d used rows of %s match the order, not one", len(cps), st.Table)
		case st.ByMatch:
		case len(cps) == 0:
			out[i].Reason = fmt.Sprintf("coupon %d is missing", o.Key)
		case cps[0].Status != st.Used || (st.OrderNo && (!cps[0].OrderNo.Valid || cps[0].OrderNo.String != o.No)):
			out[i].Reason = fmt.Sprintf("coupon %d is status %s for order %q, not locked by this order",
				o.Key, cps[0].Status, cps[0].OrderNo.String)
		}
	}
	return out
}

// checkCopies is check for copies (AnyCopy): each order gets its copy
// (assign); an order left without one is as an order matching no used
// row: no coupon with Optional, else set aside.
func checkCopies(st *closesql.Coupon, orders []Order, rows []row) []Verdict {
	copies, matched := assign(rows)
	out := make([]Verdict, len(orders))
	for i, o := range orders {
		switch _, served := copies[o.Key]; {
		case served:
		case st.Optional:
			out[i].Drop = true // as an order matching no used row
		case matched[o.Key] == 0:
			out[i].Reason = fmt.Sprintf("0 used rows of %s match the order", st.Table)
		default:
			out[i].Reason = fmt.Sprintf("%d used rows of %s match the order, each taken by an order before it in this close", matched[o.Key], st.Table)
		}
	}
	return out
}

// assign gives each order a distinct copy of rows, the used copies
// matching the orders (by order id, with the copy's id): the orders in
// ascending id, each the lowest copy id no order before it took. It
// returns each served order's copy (by order id; an order that found every
// matching copy taken is absent) and how many used copies match each
// order.
func assign(rows []row) (copies, matched map[int64]int64) {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Copy, b.Copy)) })
	copies, matched = map[int64]int64{}, map[int64]int64{}
	taken := map[int64]bool{}
	for _, r := range rows {
		matched[r.ID]++
		if _, served := copies[r.ID]; served || taken[r.Copy] {
			continue
		}
		copies[r.ID], taken[r.Copy] = r.Copy, true
	}
	return copies, matched
}

// matchedOnce returns those of ids (orders, by match) that have exactly one
// of rows, the used rows matching them, and whether every order's count
// is as a close takes it: one, or none with optional (the order used no
// coupon). Any other count is not (false).
func matchedOnce(ids []int64, rows []row, optional bool) ([]int64, bool) {
	per := make(map[int64]int, len(ids))
	for _, r := range rows {
		per[r.ID]++
	}
	once := make([]int64, 0, len(ids))
	for _, id := range ids {
		switch n := per[id]; {
		case n == 1:
			once = append(once, id)
		case n == 0 && optional:
		default:
			return nil, false
		}
	}
	return once, true
}

// copyIDs returns the copies' ids, ascending.
func copyIDs(copies map[int64]int64) []int64 {
	return slices.Sorted(maps.Values(copies))
}
