package orders

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// ErrOrderNotFound is returned by Pay for an order number that does not exist.
var ErrOrderNotFound = errors.New("orders: order not found")

// ErrLeaseExpired means a close transaction was rolled back because its locks
// might have expired before COMMIT; the orders are left to the next pass.
var ErrLeaseExpired = errors.New("orders: lock lease ran out before commit")

// ErrOutOfStock is returned by PlaceOrder when a SKU has too little stock.
var ErrOutOfStock = errors.New("orders: out of stock")

// ErrCouponUnavailable is returned by PlaceOrder when the coupon is not unused.
var ErrCouponUnavailable = errors.New("orders: coupon not available")

// CompensationError says why an order cannot be closed as its data stands (a
// missing inventory row, too little locked stock, a coupon not locked by the
// order). Retrying does not help until the data is fixed, so the order goes
// to the dead-letter table at once.
type CompensationError struct {
	OrderNo string
	Reason  string
}

func (e *CompensationError) Error() string {
	return fmt.Sprintf("close order %s: %s", e.OrderNo, e.Reason)
}

// MySQL error numbers the close path treats specially.
const (
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

// retryable reports a transaction aborted by lock contention: deadlock or
// lock wait timeout. The same transaction may succeed when run again.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

// serverStateErrors are MySQL/MariaDB errors about the server or the
// connection (shutting down, killed, read-only after a failover, too many
// connections, timeouts), not about an order's data: the orders are left to
// the next pass instead of being dead-lettered.
var serverStateErrors = map[uint16]bool{
	1040: true,                                     // too many connections
	1053: true,                                     // server shutdown in progress
	1077: true, 1078: true, 1079: true, 1080: true, // shutdown
	1152: true, 1153: true, 1156: true, 1157: true, 1158: true, 1159: true, 1160: true, 1161: true, // network
	1180: true, // got error during COMMIT
	1203: true, // max user connections
	1290: true, // --read-only
	1792: true, // read-only transaction
	1836: true, // read-only mode
	1927: true, // connection killed (MariaDB)
	1969: true, // statement timeout (MariaDB max_statement_time)
	3024: true, // max_execution_time exceeded (MySQL)
}

// statementError reports an error the server raised for a statement because
// of the data it touched (as opposed to a lost connection, a server going
// away or a cancelled context): the data of some order made it fail, so
// closing the orders one by one isolates the culprit.
func statementError(err error) bool {
	var me *mysql.MySQLError
	var ce *CompensationError
	if errors.As(err, &ce) {
		return true
	}
	return errors.As(err, &me) && !serverStateErrors[me.Number]
}
