package dbserver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
)

// The test server says it is MariaDB, and MariaDB's 4031 (a trigger that
// FOLLOWS a missing one) is about the database, not a lost connection as
// MySQL 8's 4031 would be.
func TestDetectServerOnMariaDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	server, err := dbserver.DetectServer(ctx, db)
	require.NoError(t, err)
	require.Equal(t, dbserver.ServerMariaDB, server)

	_, err = db.ExecContext(ctx, `CREATE TABLE inventory (available INT NOT NULL)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TRIGGER tr_follows BEFORE UPDATE ON inventory FOR EACH ROW FOLLOWS tr_missing SET NEW.available = NEW.available`)
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "%v", err)
	require.Equal(t, uint16(4031), me.Number, me.Message)
	require.Equal(t, dbserver.KindDatabase, server.Kind(err))
	require.Equal(t, dbserver.KindConnection, dbserver.ServerMySQL.Kind(&mysql.MySQLError{Number: 4031, Message: "disconnected because of inactivity"}))
}
