package payment

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Reasons of a payment_conflict row.
const (
	// conflictLate: the payment arrived for an order already closed.
	conflictLate = "late"
	// conflictDuplicate: the order had been paid with another payment.
	conflictDuplicate = "duplicate"
)

// recordConflict is Pay's answer to a payment that cannot be taken (late:
// the order is closed; duplicate: paid with another payment): the order
// stays as it is, and the payment is recorded in payment_conflict (once
// per payment id, however often the payment side repeats its
// notification) so the business refunds it. It runs in Pay's transaction,
// with the order row locked.
func (s *Service) recordConflict(ctx context.Context, tx *sqlx.Tx, o order, n Notice, reason string) error {
	added, err := s.store.recordPaymentConflict(ctx, tx, o, n, reason)
	if err != nil {
		return err
	}
	if !added {
		// A repeat of a recorded payment, unless its id was recorded for
		// another order (the payment side reusing an id is not ours to
		// settle).
		other, err := s.store.conflictOrder(ctx, tx, n.PaymentID)
		if err != nil {
			return err
		}
		if other != o.OrderNo {
			return fmt.Errorf("payment %s is already recorded for order %s", n.PaymentID, other)
		}
		return nil
	}
	s.log.WarnContext(ctx, "payment cannot be taken; recorded in payment_conflict for a refund",
		"order_no", o.OrderNo, "payment_id", n.PaymentID, "reason", reason)
	return nil
}
