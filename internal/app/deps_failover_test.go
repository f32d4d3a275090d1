package app

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/mariadbtest"
)

// A primary that turns read-only (the old primary after a failover, still
// up behind the old address) answers writes with 1290: the pool OpenDB
// builds closes that connection (rejectReadOnly) instead of handing it out
// again, the error carries the read-only hint, and idle connections are
// closed after mysql.connMaxIdleTime. read_only is set on a private server,
// never on the shared one.
func TestReadOnlyAnswerDropsTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	root, _ := srv.NewDB(t, "shop")
	// read_only does not stop a user with READ ONLY ADMIN (root): the
	// executor's user is an ordinary one.
	for _, stmt := range []string{
		"CREATE USER 'app'@'%' IDENTIFIED BY 'pw'", "GRANT ALL ON shop.* TO 'app'@'%'",
		"CREATE USER 'app'@'localhost' IDENTIFIED BY 'pw'", "GRANT ALL ON shop.* TO 'app'@'localhost'",
	} {
		_, err := root.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	dsn := mysql.NewConfig()
	dsn.User, dsn.Passwd, dsn.Net, dsn.Addr, dsn.DBName = "app", "pw", "tcp", srv.Addr, "shop"
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
		v, ok := map[string]string{"MYSQL_DSN": dsn.FormatDSN(), "MYSQL_MAX_OPEN_CONNS": "4", "MYSQL_CONN_MAX_IDLE_TIME": "1s"}[k]
		return v, ok
	})
	require.NoError(t, err)
	db, err := OpenDB(ctx, cfg)
	require.NoError(t, err)
	defer db.Close()

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	var id int64
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
	alive := func() bool {
		var n int
		require.NoError(t, root.GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id))
		return n == 1
	}
	require.True(t, alive())

	_, err = root.ExecContext(ctx, "SET GLOBAL read_only = 1")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "INSERT INTO inventory (sku_id, available) VALUES (1, 5)")
	require.Error(t, err)
	require.Equal(t, dbserver.KindConnection, dbserver.KindOf(err), "%v", err)
	require.Contains(t, dbserver.Hint(err), "answered read-only")
	require.ErrorIs(t, conn.Close(), sql.ErrConnDone, "database/sql dropped the connection the driver called bad")
	require.Eventually(t, func() bool { return !alive() }, 5*time.Second, 50*time.Millisecond,
		"the connection that got the read-only answer is closed, not put back in the pool")

	_, err = root.ExecContext(ctx, "SET GLOBAL read_only = 0")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "INSERT INTO inventory (sku_id, available) VALUES (1, 5)")
	require.NoError(t, err, "the next call gets a fresh connection")

	// Idle connections go after connMaxIdleTime (1s here), long before
	// the lifetime (5m).
	require.Eventually(t, func() bool { return db.Stats().MaxIdleTimeClosed > 0 && db.Stats().Idle == 0 },
		10*time.Second, 100*time.Millisecond, "idle connections closed: %+v", db.Stats())
}
