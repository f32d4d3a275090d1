package orders

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// recordLatePayment is Pay's answer to a payment that lost to the close: the
// order stays closed, and the payment is recorded in payment_conflict (once
// per order, however often the payment side repeats its notification) so
// the business refunds it. It runs in Pay's transaction, with the order row
// locked. Only closed orders get a row: for other states (an order already
// past paid) the payment is not one that lost to a close.
func (s *Service) recordLatePayment(ctx context.Context, tx *sqlx.Tx, o orderRow) error {
	if o.Status != statusClosed {
		return nil
	}
	added, err := s.store.recordPaymentConflict(ctx, tx, o.OrderNo, o.ID)
	if err != nil {
		return err
	}
	if added {
		s.log.WarnContext(ctx, "payment arrived for a closed order; recorded in payment_conflict for a refund",
			"order_no", o.OrderNo)
	}
	return nil
}
