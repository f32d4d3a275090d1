package mariadbtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
)

// A replica follows its primary by GTID: a row written on the primary is
// on the replica once WaitCaughtUp returns; an ordinary user cannot write
// on the replica (read-only) until it is promoted, and then can.
func TestReplicationAndPromote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := mariadbtest.Start(t, mariadbtest.Options{Args: mariadbtest.PrimaryArgs(1)})
	replica := mariadbtest.Start(t, mariadbtest.Options{Args: mariadbtest.ReplicaArgs(2)})
	require.NoError(t, replica.ReplicateFrom(ctx, primary))
	db, _ := primary.NewDB(t, "repl_test")
	require.NoError(t, primary.CreateUser(ctx, "app", "pw", "repl_test"))
	_, err := db.ExecContext(ctx, "INSERT INTO inventory (sku_id, available, locked) VALUES (1, 10, 0)")
	require.NoError(t, err)
	require.NoError(t, replica.WaitCaughtUp(ctx, primary, 30*time.Second))

	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "app", "pw", "tcp", replica.Addr, "repl_test"
	app, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer app.Close()
	var n int
	require.NoError(t, app.GetContext(ctx, &n, "SELECT available FROM inventory WHERE sku_id = 1"))
	require.Equal(t, 10, n, "the row replicated")
	_, err = app.ExecContext(ctx, "UPDATE inventory SET available = 9 WHERE sku_id = 1")
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me, "a replica is read-only for an ordinary user")
	require.Equal(t, uint16(1290), me.Number)

	require.NoError(t, replica.Promote(ctx))
	_, err = app.ExecContext(ctx, "UPDATE inventory SET available = 9 WHERE sku_id = 1")
	require.NoError(t, err, "the promoted replica takes writes")
}
