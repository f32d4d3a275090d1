// Package delaytest holds what the delayed-task tests share: those of
// package delay itself and those of its users (handlers, the API port).
//
// It does not import delay, so that delay's own tests, which are inside the
// package, can use it: it works on the task table and on the Start and Stop
// every long-lived part has, not on delay's types.
package delaytest

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
)

// WaitLong bounds every wait for a dispatcher to act.
const WaitLong = 15 * time.Second

// Part is a long-lived part (a dispatcher, a timer): Start and Stop as
// docs/development.md describes them.
type Part interface {
	Start(context.Context) error
	Stop(context.Context) error
}

// Start starts p and stops it when the test ends.
func Start(t testing.TB, p Part) {
	t.Helper()
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.Stop(ctx))
	})
}

// WaitStatus waits until the task biz has the status want (for WaitLong).
func WaitStatus(t testing.TB, db sqlx.Queryer, biz, want string) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		require.NoError(t, sqlx.Get(db, &last, `SELECT status FROM job_delay_task WHERE biz_uuid = ?`, biz))
		return last == want
	}, WaitLong, 10*time.Millisecond, "task %s never reached %s", biz, want)
}

// CountStatus counts the tasks of a status.
func CountStatus(t testing.TB, db sqlx.Queryer, status string) int {
	t.Helper()
	var n int
	require.NoError(t, sqlx.Get(db, &n, `SELECT COUNT(*) FROM job_delay_task WHERE status = ?`, status))
	return n
}

// AgeTask moves the task biz's updated_at back by d, as if d had passed.
func AgeTask(t testing.TB, db sqlx.Execer, biz string, d time.Duration) {
	t.Helper()
	_, err := db.Exec(`UPDATE job_delay_task SET updated_at = updated_at - INTERVAL ? MICROSECOND WHERE biz_uuid = ?`,
		d.Microseconds(), biz)
	require.NoError(t, err)
}
