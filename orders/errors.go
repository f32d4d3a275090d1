package orders

import (
	"errors"
	"fmt"
)

// ErrOrderNotFound is returned by Pay for an order number that does not exist.
var ErrOrderNotFound = errors.New("orders: order not found")

// ErrOrderState means the order is not in the status the step needs (e.g.
// shipping an unpaid order).
var ErrOrderState = errors.New("orders: order is not in the status this step needs")

// ErrLeaseExpired means a close transaction was rolled back because its locks
// might have expired before COMMIT; the orders are left to the next pass.
var ErrLeaseExpired = errors.New("orders: lock lease ran out before commit")

// ErrOutOfStock is returned by PlaceOrder when a SKU has too little stock.
var ErrOutOfStock = errors.New("orders: out of stock")

// ErrCouponUnavailable is returned by PlaceOrder when the coupon is not unused.
var ErrCouponUnavailable = errors.New("orders: coupon not available")

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
