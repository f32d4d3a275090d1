package dbserver

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// capLockWaitSQL sets the session's lock wait to the smaller of the server's
// global setting and the argument, in seconds.
const capLockWaitSQL = `SET SESSION innodb_lock_wait_timeout = LEAST(@@GLOBAL.innodb_lock_wait_timeout, ?)`

func (store) capLockWait(ctx context.Context, ex sqlx.ExecerContext, secs int64) error {
	if _, err := ex.ExecContext(ctx, capLockWaitSQL, secs); err != nil {
		return fmt.Errorf("cap the session's lock wait at %ds: %w", secs, err)
	}
	return nil
}
