package orders

import (
	"errors"
	"fmt"
)

// ErrOrderNotFound is returned for an order number that does not exist
// (by the order view, and by package payment's Service).
var ErrOrderNotFound = errors.New("orders: order not found")

// ErrLeaseExpired means a close transaction was rolled back because its locks
// might have expired before COMMIT; the orders are left to the next pass.
var ErrLeaseExpired = errors.New("orders: lock lease ran out before commit")

// CompensationError says why an order cannot be closed as its data stands (a
// missing inventory row, too little locked stock, a coupon not locked by the
// order, a guarded UPDATE that changed fewer rows than were locked). Retrying
// does not help until the data is fixed, so the order goes to the dead-letter
// table at once. OrderNo is empty when the check covered a whole page; the
// per-order fallback then finds the order.
type CompensationError struct {
	OrderNo string
	Reason  string
}

func (e *CompensationError) Error() string {
	if e.OrderNo == "" {
		return "close orders: " + e.Reason
	}
	return fmt.Sprintf("close order %s: %s", e.OrderNo, e.Reason)
}

// OrderDataError marks the error as about the order's own data
// (dbserver.OrderData), so dbserver.Kind calls it KindOrder.
func (e *CompensationError) OrderDataError() bool { return true }
