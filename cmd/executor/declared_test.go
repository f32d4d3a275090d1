package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// A shop's own order and item tables, declared through the environment:
// the executor's column names, the shop's table names, no stock or coupon
// given back here.
var declaredShop = []string{
	"CREATE TABLE t_order (id bigint NOT NULL AUTO_INCREMENT, order_no varchar(32) NOT NULL, user_id bigint NOT NULL, " +
		"status tinyint NOT NULL, create_time datetime NOT NULL, timeout_minutes int NOT NULL, close_time datetime(3) NULL, " +
		"close_reason varchar(32) NULL, PRIMARY KEY (id), UNIQUE KEY uk_order_no (order_no), " +
		"KEY idx_status_create_time (status, create_time)) ENGINE=InnoDB",
	"CREATE TABLE t_order_item (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, order_no varchar(32) NOT NULL, sku_id bigint NOT NULL, " +
		"quantity int NOT NULL, KEY idx_order_no (order_no)) ENGINE=InnoDB",
}

func declaredEnv(t *testing.T, dsn string) map[string]string {
	_, prefix := redistest.Client(t)
	return map[string]string{"MYSQL_DSN": dsn, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(), "ORDER_SCHEMA_TABLE": "t_order", "ORDER_SCHEMA_ITEMS_TABLE": "t_order_item",
		"ORDER_SCHEMA_STOCK_TABLE": "", "ORDER_SCHEMA_COUPON_TABLE": ""}
}

// Through the binary: migrate with a declared schema leaves the shop's
// tables alone and says so; status lists the skipped steps and, once an
// index is gone, the CREATE INDEX to run, as does the start-up check of
// run; demo-data refuses the declared schema.
func TestMigrateStatusAndRunWithADeclaredSchema(t *testing.T) {
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	for _, s := range declaredShop {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err)
	}
	env := declaredEnv(t, db.DSN)

	code, out, errOut := runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "0001_order_info: skipped (order.schema declares the shop's tables")
	require.True(t, strings.HasSuffix(out, ", 12 skipped (order.schema: the shop's tables are left as they are)\n"), out)
	require.Zero(t, db.Count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()
		AND TABLE_NAME IN ('order_info', 'order_item', 'inventory', 'user_coupon')`))

	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `\n0004_order_item +skipped .*skipped: order.schema declares the shop's tables\n`, out)
	require.True(t, strings.HasSuffix(out, ", 12 skipped and 0 problems of the shop's tables (order.schema)\n"), out)

	_, err := db.ExecContext(ctx, `ALTER TABLE t_order DROP INDEX idx_status_create_time`)
	require.NoError(t, err)
	const fix = "CREATE INDEX `idx_status_create_time` ON `t_order` (`status`, `create_time`, `id`) ALGORITHM=INPLACE LOCK=NONE"
	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "\norder.schema: index t_order.idx_status_create_time is missing "+
		"(the scan walks unpaid orders by creation time and id); fix: "+fix+"\n")
	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, fix)
	require.NotContains(t, out, "xxl-job job execute start")

	code, _, errOut = runCLI(t, env, "migrate", "-run-skipped")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "order.schema still declares the shop's: remove the declaration first")

	code, _, errOut = runCLI(t, env, "demo-data", "-orders", "10")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "order.schema declares the shop's own tables (order table t_order): demo data is written only into the executor's own schema")
}

// Through the binary: a shop keeping its times as epoch milliseconds is
// refused by the start-up check until order.schema.timeUnit says so (the
// check names the unit); then run closes its due orders, stamping the
// close time in milliseconds, and leaves the others.
func TestRunWithAnEpochMillisSchema(t *testing.T) {
	db := dbtest.NewEmpty(t)
	now := epochMillisShop(t, db.DB)
	env := declaredEnv(t, db.DSN)
	code, out, errOut := runCLI(t, env, "migrate")
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, "column t_order.create_time is BIGINT; order.schema.createTime with order.schema.timeUnit: datetime "+
		"needs DATETIME or TIMESTAMP; fix: set order.schema.timeUnit: epochMillis (or epochSeconds), if create_time holds Unix epoch times")
	require.Contains(t, errOut, "column t_order.close_time is BIGINT; order.schema.closeTime")
	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, "fix: set order.schema.timeUnit: epochMillis (or epochSeconds), if create_time holds Unix epoch times")
	require.Zero(t, db.Count(t, `SELECT COUNT(*) FROM t_order WHERE status <> 0`))

	env["ORDER_SCHEMA_TIME_UNIT"] = "epochMillis"
	runEpochMillisShop(t, env, db, now)
}

// epochMillisShop creates declaredShop with its times in BIGINT epoch
// milliseconds and places EP-0, EP-1 and EP-2, an hour, 40 and 10 minutes
// before the returned now, each with a 30-minute timeout.
func epochMillisShop(t *testing.T, db *sqlx.DB) time.Time {
	t.Helper()
	ctx := context.Background()
	for _, s := range declaredShop {
		s = strings.NewReplacer("create_time datetime", "create_time bigint", "close_time datetime(3)", "close_time bigint").Replace(s)
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err)
	}
	now := time.Now()
	for i, age := range []time.Duration{time.Hour, 40 * time.Minute, 10 * time.Minute} {
		_, err := db.ExecContext(ctx, `INSERT INTO t_order (order_no, user_id, status, create_time, timeout_minutes)
			VALUES (?, 1, 0, ?, 30)`, fmt.Sprintf("EP-%d", i), now.Add(-age).UnixMilli())
		require.NoError(t, err)
	}
	return now
}

// runEpochMillisShop runs the close job on epochMillisShop's shop, placed
// at now, and checks that it closed EP-0 and EP-1, stamping the close time
// in milliseconds, and left EP-2. It returns run's standard error.
func runEpochMillisShop(t *testing.T, env map[string]string, db *dbtest.DB, now time.Time) string {
	t.Helper()
	code, out, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "closed=2")
	require.Equal(t, 0, db.Count(t, `SELECT status FROM t_order WHERE order_no = 'EP-2'`), "not due for 20 minutes")
	require.Equal(t, 2, db.Count(t, `SELECT COUNT(*) FROM t_order WHERE status = 2 AND close_time BETWEEN ? AND ?`,
		now.UnixMilli(), time.Now().UnixMilli()), "stamped in milliseconds")
	return errOut
}

// Through the binary: under a session time zone with daylight saving (a
// private server in Europe/Berlin with time_zone=SYSTEM, as in
// TestServeAndRunRefuseADSTSessionZone), run starts for a shop keeping
// epoch times without mysql.allowDSTZone, says in one Info line why the
// zone does not matter, and closes exactly its due orders: EP-2, placed 10
// minutes ago with a 30-minute timeout, would be due if its time were
// compared with the wall clock, an hour ahead of UTC in winter.
func TestRunWithAnEpochSchemaUnderADSTZone(t *testing.T) {
	srv := mariadbtest.Start(t, mariadbtest.Options{Env: []string{"TZ=Europe/Berlin"}})
	sdb, dsn := srv.NewDB(t, "shop")
	db := &dbtest.DB{DB: sdb, Name: "shop", DSN: dsn}
	now := epochMillisShop(t, sdb)
	var offset string
	require.NoError(t, sdb.Get(&offset, `SELECT TIMEDIFF(NOW(), UTC_TIMESTAMP())`))
	env := declaredEnv(t, dsn)
	env["ORDER_SCHEMA_TIME_UNIT"] = "epochMillis"

	errOut := runEpochMillisShop(t, env, db, now)
	require.Contains(t, errOut, `"level":"INFO","msg":"the mysql session time zone observes daylight saving; `+
		`no matter for order.schema.timeUnit epochMillis: its orders are compared with the database clock's instant`)
	require.Contains(t, errOut, `"zone":"time_zone=SYSTEM (CET): UTC+01:00 in January, UTC+02:00 in July"`)
	require.NotContains(t, errOut, "DAYLIGHT SAVING", "no warning that orders close early or late")
	require.Contains(t, []string{"01:00:00", "02:00:00"}, offset, "the session runs on Berlin's wall clock")
}
