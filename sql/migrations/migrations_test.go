package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/sql/migrations"
)

func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	db := dbtest.NewEmpty(t)
	ctx := context.Background()
	all, err := migrations.All()
	require.NoError(t, err)

	did, err := migrations.Apply(ctx, db.DB.DB)
	require.NoError(t, err)
	require.Len(t, did, len(all))

	did, err = migrations.Apply(ctx, db.DB.DB)
	require.NoError(t, err)
	require.Empty(t, did, "a second apply changes nothing")
}

// Users point the executor at their own order_info: migrating a database
// where the article's tables already exist (without schema_migrations) works
// and adds only what is missing.
func TestApplyOnExistingTables(t *testing.T) {
	t.Parallel()
	db := dbtest.NewEmpty(t)
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `CREATE TABLE order_info (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_no VARCHAR(64) NOT NULL UNIQUE,
		user_id BIGINT NOT NULL, status TINYINT NOT NULL DEFAULT 0, create_time DATETIME NOT NULL,
		timeout_minutes INT NOT NULL DEFAULT 30, coupon_id BIGINT NULL, update_time DATETIME NOT NULL,
		close_time DATETIME(3) NULL,
		KEY idx_status_create_time (status, create_time))`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO order_info (order_no,user_id,create_time,update_time) VALUES ('KEEP1',1,NOW(),NOW())`)
	require.NoError(t, err)

	_, err = migrations.Apply(ctx, db.DB.DB)
	require.NoError(t, err)

	var n int
	require.NoError(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM order_info WHERE order_no='KEEP1'`))
	require.Equal(t, 1, n, "existing rows are kept")
	require.NoError(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'order_info' AND column_name IN ('close_time','close_reason')`))
	require.Equal(t, 2, n)
}

func TestExplainMissingSchema(t *testing.T) {
	t.Parallel()
	for _, n := range []uint16{1146, 1054} {
		err := migrations.Explain(fmt.Errorf("scan page: %w", &mysql.MySQLError{Number: n, Message: "gone"}))
		if !strings.HasSuffix(err.Error(), "run `executor migrate`)") {
			t.Errorf("error %d: %q has no hint", n, err)
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != n {
			t.Errorf("error %d: the MySQL error is no longer in the chain", n)
		}
	}
	other := fmt.Errorf("x: %w", &mysql.MySQLError{Number: 1213})
	if got := migrations.Explain(other); got != other {
		t.Errorf("a deadlock got a schema hint: %v", got)
	}
	if migrations.Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
}
