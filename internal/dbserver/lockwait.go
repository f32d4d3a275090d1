package dbserver

import (
	"context"
	"math"
	"time"

	"github.com/jmoiron/sqlx"
)

// CapLockWait bounds how long the session's statements wait for a row lock
// (innodb_lock_wait_timeout) to what is left of ctx's deadline, in whole
// seconds, at least 1 and never above the server's own setting. Run it first
// in a transaction whose context has a deadline.
//
// Why: when the context ends during a lock wait, the driver closes the
// connection, but the server notices only when the wait ends, and until then
// the transaction keeps every row lock it already took (measured on
// MariaDB 10.11: a killed client's locks stayed 37 s, until its wait was
// granted). With the server's default of 50 s, a close cut short by its
// lease would hold order and stock rows that payments wait for long after
// the close gave up.
//
// It does nothing without a deadline or on a server not detected
// (ServerUnknown: a proxy whose handling of session variables is not
// known). A session value left on a pooled connection only shortens lock
// waits; every capped transaction sets its own.
func (s Server) CapLockWait(ctx context.Context, ex sqlx.ExecerContext) error {
	deadline, ok := ctx.Deadline()
	if !ok || s == ServerUnknown {
		return nil
	}
	secs := max(1, int64(math.Ceil(time.Until(deadline).Seconds())))
	return store{}.capLockWait(ctx, ex, secs)
}
