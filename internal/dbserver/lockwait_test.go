package dbserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
)

// CapLockWait lowers the session's lock wait to the seconds left before the
// context's deadline, rounded up, and never raises it above the server's
// own; without a deadline, or on a server not detected, it sets nothing.
func TestCapLockWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := dbtest.NewEmpty(t).Connx(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var global int64
	require.NoError(t, conn.GetContext(ctx, &global, `SELECT @@GLOBAL.innodb_lock_wait_timeout`))
	require.Greater(t, global, int64(3), "the test needs a server lock wait above 3 s")
	session := func() int64 {
		var v int64
		require.NoError(t, conn.GetContext(ctx, &v, `SELECT @@SESSION.innodb_lock_wait_timeout`))
		return v
	}
	within := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}

	require.NoError(t, dbserver.ServerMariaDB.CapLockWait(ctx, conn))
	require.Equal(t, global, session(), "no deadline: unchanged")
	require.NoError(t, dbserver.ServerUnknown.CapLockWait(within(2*time.Second), conn))
	require.Equal(t, global, session(), "server not detected: unchanged")

	require.NoError(t, dbserver.ServerMariaDB.CapLockWait(within(2500*time.Millisecond), conn))
	require.Equal(t, int64(3), session(), "2.5 s left: rounded up")
	require.NoError(t, dbserver.ServerMariaDB.CapLockWait(within(900*time.Millisecond), conn))
	require.Equal(t, int64(1), session(), "under a second left: 1 s")
	require.NoError(t, dbserver.ServerMariaDB.CapLockWait(within(time.Duration(global+100)*time.Second), conn))
	require.Equal(t, global, session(), "a long deadline: the server's own setting")
}
