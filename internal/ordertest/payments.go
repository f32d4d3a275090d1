package ordertest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// CheckPayments verifies the payment records: a payment_conflict row of
// reason late belongs to a closed order (a payment that lost to the close;
// an order that is paid was never both), one of reason duplicate to a paid
// order whose recorded payment (order_payment) is another one; a row
// written without a payment id of its own ('legacy:' + order_no) carries
// the order's pay_amount; every recorded payment belongs to an order that
// is paid (or shipped, completed). The unique keys keep one conflict row per
// payment and one payment per order. Returns nil, a *ViolationsError, or a
// read error.
func CheckPayments(ctx context.Context, db sqlx.QueryerContext) error {
	var vs []Violation
	for _, r := range paymentRules {
		var nos []string
		if err := sqlx.SelectContext(ctx, db, &nos, r.query); err != nil {
			return fmt.Errorf("ordertest: rule %s: %w", r.name, err)
		}
		if len(nos) > 0 {
			vs = append(vs, Violation{Rule: r.name,
				Detail: fmt.Sprintf("%d: %s (e.g. %s)", len(nos), r.what, strings.Join(nos[:min(len(nos), 5)], ", "))})
		}
	}
	if len(vs) == 0 {
		return nil
	}
	return &ViolationsError{Violations: vs}
}

// paymentRules return one order_no per offending row; none must come back.
var paymentRules = []struct{ name, what, query string }{
	{"conflict_not_closed", "late payment conflicts whose order is missing or not closed", `
SELECT p.order_no FROM payment_conflict p LEFT JOIN order_info o ON o.order_no = p.order_no
WHERE p.reason = 'late' AND (o.id IS NULL OR o.status <> 2)`},
	{"conflict_duplicate_not_paid", "duplicate payment conflicts whose order is not paid with another recorded payment", `
SELECT p.order_no FROM payment_conflict p LEFT JOIN order_info o ON o.order_no = p.order_no
LEFT JOIN order_payment a ON a.order_no = p.order_no
WHERE p.reason = 'duplicate' AND (o.id IS NULL OR o.status NOT IN (1, 3, 4) OR a.id IS NULL OR a.payment_id = p.payment_id)`},
	{"conflict_reason", "payment conflicts with a reason other than late or duplicate", `
SELECT order_no FROM payment_conflict WHERE reason NOT IN ('late', 'duplicate')`},
	{"conflict_amount", "payment conflicts without a payment id of their own whose amount is not the order's pay_amount", `
SELECT p.order_no FROM payment_conflict p JOIN order_info o ON o.order_no = p.order_no
WHERE p.payment_id = CONCAT('legacy:', p.order_no) AND p.pay_amount <> o.pay_amount`},
	{"payment_not_paid", "recorded payments whose order is missing or not paid", `
SELECT a.order_no FROM order_payment a LEFT JOIN order_info o ON o.order_no = a.order_no
WHERE o.id IS NULL OR o.status NOT IN (1, 3, 4)`},
}
