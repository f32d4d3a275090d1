package coupon

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/closesql"
)

// Unexpected makes the error of a statement that changed or found other
// than the rows a close expects (want, got); what names the step. The
// caller says what that means in its kind of close transaction.
type Unexpected func(what string, want, got int64) error

// Validate locks the coupons of orders (after the stock locks; st nil:
// no coupon table, nothing to do) and judges each order's coupon from the
// locked rows, one Verdict per order: by id, missing or not used (by this
// order, when the coupon names it); by match, not exactly one used row
// matching the order (none is no coupon with Optional); with copies, no
// copy left for it. Orders without a coupon are not passed.
func Validate(ctx context.Context, q sqlx.QueryerContext, st *closesql.Coupon, orders []Order) ([]Verdict, error) {
	if st == nil || len(orders) == 0 {
		return nil, nil
	}
	rows, err := lock(ctx, q, st, keys(orders))
	if err != nil {
		return nil, err
	}
	if st.AnyCopy {
		return checkCopies(st, orders, rows), nil
	}
	return check(st, orders, rows), nil
}

// GiveBack sets the coupons of orders, the closed orders with a coupon,
// back to unused in one statement (in ascending key order), each still
// used, and expects one row per coupon, else unexpected. A coupon that
// names its order goes back only for that order, and two orders cannot
// share it: one row per order is expected. By match it first locks the
// orders' used rows and checks each order matches exactly one (the
// restore counts only the page's total, which an order matching two rows,
// a copy used by another order, and one matching none add up to); with
// Optional, an order matching none used no coupon and the restore leaves
// it out, as the checked close does, so a page of such orders needs no
// second transaction. With copies it locks them and gives back each
// order's (assign).
func GiveBack(ctx context.Context, e sqlx.ExtContext, st *closesql.Coupon, orders []Order, unexpected Unexpected) error {
	if len(orders) == 0 {
		return nil
	}
	if st.AnyCopy {
		return giveBackCopies(ctx, e, st, orders, unexpected)
	}
	ids, want := keys(orders), int64(len(orders))
	if !st.OrderNo {
		want = int64(len(ids)) // two orders naming one coupon give it back once
	}
	if st.ByMatch {
		rows, err := lock(ctx, e, st, ids)
		if err != nil {
			return err
		}
		once, ok := matchedOnce(ids, rows, st.Optional)
		if !ok {
			return unexpected("find one used coupon row per order", int64(len(ids)), int64(len(rows)))
		}
		if ids, want = once, int64(len(once)); len(ids) == 0 {
			return nil
		}
	}
	n, err := restore(ctx, e, st, ids, orders)
	if err != nil {
		return err
	}
	if n != want {
		return unexpected("restore coupons", want, n)
	}
	return nil
}

// giveBackCopies gives back one copy for each of orders (assign), in one
// statement by the copies' ids, each still used. An order left without a
// copy, or a copy not changed, is unexpected.
func giveBackCopies(ctx context.Context, e sqlx.ExtContext, st *closesql.Coupon, orders []Order, unexpected Unexpected) error {
	want := int64(len(orders))
	rows, err := lock(ctx, e, st, keys(orders))
	if err != nil {
		return err
	}
	copies, _ := assign(rows)
	if int64(len(copies)) != want {
		return unexpected("find a used copy of each order's coupon", want, int64(len(copies)))
	}
	n, err := restore(ctx, e, st, copyIDs(copies), nil)
	if err != nil {
		return err
	}
	if n != want {
		return unexpected("restore coupons", want, n)
	}
	return nil
}
