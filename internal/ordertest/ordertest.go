// Package ordertest checks the invariants of the order tables after closes,
// payments and failures: the orders tests, the fault suite and the bench use
// it. Take a Baseline before the work, then Check after it:
//
//   - stock: per SKU, available + locked + the quantities of paid orders'
//     items equals the baseline's total; locked equals the quantities of
//     unpaid orders' items (all locked stock is accounted for by unpaid
//     orders); neither is negative;
//   - every closed order has exactly one order_close_log row, a close time
//     and a reason; every close-log row's order is closed;
//   - a closed order's coupon is no longer held by it (back to unused:
//     status 0, order_no NULL, unless another order took it since); no
//     coupon stays locked (status 1) or used (status 2) by an order that is
//     not unpaid or paid respectively; unpaid and paid orders hold their
//     coupons;
//   - no order paid at the baseline is anything but paid now.
//
// Shipped (3) and completed (4) orders count as paid throughout: their
// stock was consumed and their coupon used when they were paid.
//
// Order builds the exact rows a test needs (one order with its items,
// stock and coupon), where demo data is statistical; it and Shop (demo
// data shaped as a shop's tables after a while, for plan tests) are the
// only parts that write. States reads what the steps after payment change. Nothing here imports test-only packages, so a binary (the
// bench) can use the checker.
package ordertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// Baseline is what the invariants compare with.
type Baseline struct {
	// Stock is each SKU's total: available + locked + quantities of paid
	// orders' items.
	Stock map[int64]int64
	// PaidIDs are the orders paid at the baseline.
	PaidIDs []int64
}

// Snapshot takes the baseline of db's current state. Take it while nothing
// else changes the tables.
func Snapshot(ctx context.Context, db sqlx.QueryerContext) (*Baseline, error) {
	b := &Baseline{Stock: map[int64]int64{}}
	var inv []stockRow
	if err := sqlx.SelectContext(ctx, db, &inv, inventorySQL); err != nil {
		return nil, fmt.Errorf("ordertest: read inventory: %w", err)
	}
	for _, r := range inv {
		b.Stock[r.SKUID] = r.Available + r.Locked
	}
	qty, err := itemQuantities(ctx, db)
	if err != nil {
		return nil, err
	}
	for sku, q := range qty {
		if _, ok := b.Stock[sku]; ok {
			b.Stock[sku] += q[1]
		}
	}
	if err := sqlx.SelectContext(ctx, db, &b.PaidIDs, paidIDsSQL); err != nil {
		return nil, fmt.Errorf("ordertest: read paid orders: %w", err)
	}
	return b, nil
}

// Violation is one broken invariant.
type Violation struct {
	Rule   string // short name, e.g. "stock_total"
	Detail string
}

// ViolationsError lists what Check found.
type ViolationsError struct {
	Violations []Violation
}

func (e *ViolationsError) Error() string {
	rules := map[string]int{}
	for _, v := range e.Violations {
		rules[v.Rule]++
	}
	names := make([]string, 0, len(rules))
	for r := range rules {
		names = append(names, r)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "ordertest: %d invariant violations (", len(e.Violations))
	for i, r := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", r, rules[r])
	}
	b.WriteString(")")
	for i, v := range e.Violations {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... %d more", len(e.Violations)-10)
			break
		}
		fmt.Fprintf(&b, "\n  %s: %s", v.Rule, v.Detail)
	}
	return b.String()
}

// Rules returns the distinct rule names violated, sorted.
func (e *ViolationsError) Rules() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range e.Violations {
		if !seen[v.Rule] {
			seen[v.Rule] = true
			out = append(out, v.Rule)
		}
	}
	sort.Strings(out)
	return out
}

// maxPerRule caps the violations listed per rule (counts stay exact).
const maxPerRule = 20

// Check verifies the invariants against base. It returns nil when all hold, a
// *ViolationsError listing what does not, or another error if the database
// could not be read.
func Check(ctx context.Context, db sqlx.QueryerContext, base *Baseline) error {
	if base == nil {
		return errors.New("ordertest: Check needs a baseline")
	}
	v := &violations{perRule: map[string]int{}}
	if err := v.checkStock(ctx, db, base); err != nil {
		return err
	}
	if err := v.checkOrderRules(ctx, db); err != nil {
		return err
	}
	if err := v.checkPaid(ctx, db, base); err != nil {
		return err
	}
	if len(v.list) == 0 {
		return nil
	}
	return &ViolationsError{Violations: v.list}
}

// violations collects what Check finds.
type violations struct {
	list    []Violation
	perRule map[string]int
}

func (v *violations) add(rule, format string, args ...any) {
	v.list = append(v.list, Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

// limited adds a violation unless its rule has maxPerRule listed.
func (v *violations) limited(rule, format string, args ...any) {
	if v.perRule[rule]++; v.perRule[rule] <= maxPerRule {
		v.add(rule, format, args...)
	}
}

// checkStock checks each SKU of the baseline: its total unchanged but for
// paid orders, locked what unpaid orders hold, nothing negative or gone.
func (v *violations) checkStock(ctx context.Context, db sqlx.QueryerContext, base *Baseline) error {
	inv, qty, err := readStock(ctx, db)
	if err != nil {
		return err
	}
	now := map[int64]stockRow{}
	for _, r := range inv {
		now[r.SKUID] = r
		want, ok := base.Stock[r.SKUID]
		if !ok {
			continue // created after the baseline: nothing to compare
		}
		q := qty[r.SKUID]
		if got := r.Available + r.Locked + q[1]; got != want {
			v.limited("stock_total", "sku %d: available %d + locked %d + paid %d = %d, baseline %d", r.SKUID, r.Available, r.Locked, q[1], got, want)
		}
		if r.Locked != q[0] {
			v.limited("stock_locked", "sku %d: locked %d, unpaid orders hold %d", r.SKUID, r.Locked, q[0])
		}
		if r.Available < 0 || r.Locked < 0 {
			v.limited("stock_negative", "sku %d: available %d, locked %d", r.SKUID, r.Available, r.Locked)
		}
	}
	for sku := range base.Stock {
		if _, ok := now[sku]; !ok {
			v.limited("stock_missing", "sku %d: inventory row gone", sku)
		}
	}
	return nil
}

// readStock reads the inventory and the units of each SKU that unpaid
// ([0]) and paid ([1]) orders hold.
func readStock(ctx context.Context, db sqlx.QueryerContext) ([]stockRow, map[int64][2]int64, error) {
	var inv []stockRow
	if err := sqlx.SelectContext(ctx, db, &inv, inventorySQL); err != nil {
		return nil, nil, fmt.Errorf("ordertest: read inventory: %w", err)
	}
	qty, err := itemQuantities(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	return inv, qty, nil
}

// checkOrderRules checks the order, close log and coupon rules, each a
// count plus a few examples.
func (v *violations) checkOrderRules(ctx context.Context, db sqlx.QueryerContext) error {
	for _, r := range orderRules {
		var n int
		if err := sqlx.GetContext(ctx, db, &n, "SELECT COUNT(*) FROM ("+r.query+") v"); err != nil {
			return fmt.Errorf("ordertest: rule %s: %w", r.name, err)
		}
		if n == 0 {
			continue
		}
		var examples []string
		if err := sqlx.SelectContext(ctx, db, &examples, "SELECT v.order_no FROM ("+r.query+") v LIMIT 5"); err != nil {
			return fmt.Errorf("ordertest: rule %s: %w", r.name, err)
		}
		v.add(r.name, "%d: %s (e.g. %s)", n, r.what, strings.Join(examples, ", "))
	}
	return nil
}

// checkPaid checks that the orders paid at the baseline are still paid.
func (v *violations) checkPaid(ctx context.Context, db sqlx.QueryerContext, base *Baseline) error {
	for ids := base.PaidIDs; len(ids) > 0; {
		chunk := ids[:min(len(ids), 5000)]
		ids = ids[len(chunk):]
		var bad []string
		q, args, err := sqlx.In(paidNoLongerPaidSQL, chunk)
		if err != nil {
			return err
		}
		if err := sqlx.SelectContext(ctx, db, &bad, q, args...); err != nil {
			return fmt.Errorf("ordertest: read paid orders: %w", err)
		}
		for _, no := range bad {
			v.limited("paid_changed", "order %s was paid at the baseline and is not now", no)
		}
	}
	return nil
}

// StatusCounts counts orders by status.
type StatusCounts struct {
	Unpaid, Paid, Closed int
	// Shipped (3) and Completed (4) are the states after paid.
	Shipped, Completed int
	// Due are unpaid orders whose timeout has passed by the database clock.
	Due int
}

// Counts counts db's orders by status.
func Counts(ctx context.Context, db sqlx.QueryerContext) (StatusCounts, error) {
	var c StatusCounts
	err := sqlx.GetContext(ctx, db, &c, countsSQL)
	if err != nil {
		return c, fmt.Errorf("ordertest: count orders: %w", err)
	}
	return c, nil
}

// CountsOf is Counts for a test, which fails on an error.
func CountsOf(t testing.TB, db sqlx.QueryerContext) StatusCounts {
	t.Helper()
	c, err := Counts(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// itemQuantities sums item quantities per SKU: [0] unpaid orders', [1] paid
// orders'.
func itemQuantities(ctx context.Context, db sqlx.QueryerContext) (map[int64][2]int64, error) {
	var rows []struct {
		SKUID  int64 `db:"sku_id"`
		Status int   `db:"status"`
		Qty    int64 `db:"qty"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, itemQuantitiesSQL); err != nil {
		return nil, fmt.Errorf("ordertest: sum item quantities: %w", err)
	}
	out := map[int64][2]int64{}
	for _, r := range rows {
		q := out[r.SKUID]
		switch r.Status {
		case 0:
			q[0] += r.Qty
		case 1, 3, 4:
			q[1] += r.Qty
		}
		out[r.SKUID] = q
	}
	return out, nil
}

type stockRow struct {
	SKUID     int64 `db:"sku_id"`
	Available int64 `db:"available"`
	Locked    int64 `db:"locked"`
}
