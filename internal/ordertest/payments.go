package ordertest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// CheckPayments verifies the late-payment records: every payment_conflict
// row belongs to a closed order (a payment that lost to the close; an order
// that is paid was never both) and carries the order's pay_amount. The
// unique key keeps one row per order. Returns nil, a *ViolationsError, or a
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
	{"conflict_not_closed", "payment conflicts whose order is missing or not closed", `
SELECT p.order_no FROM payment_conflict p LEFT JOIN order_info o ON o.order_no = p.order_no
WHERE o.id IS NULL OR o.status <> 2`},
	{"conflict_amount", "payment conflicts whose amount is not the order's pay_amount", `
SELECT p.order_no FROM payment_conflict p JOIN order_info o ON o.order_no = p.order_no
WHERE p.pay_amount <> o.pay_amount`},
}
