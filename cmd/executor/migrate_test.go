package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/sql/migrations"
)

// shopOrderInfo is order_info as a shop's order service created it before
// the executor came (no coupon_id, no unique order_no, none of the later
// columns).
const shopOrderInfo = "CREATE TABLE `order_info` (" +
	"`id` bigint(20) NOT NULL AUTO_INCREMENT COMMENT '订单ID', `order_no` varchar(64) NOT NULL COMMENT '订单编号', " +
	"`user_id` bigint(20) NOT NULL COMMENT '用户ID', `status` tinyint(4) NOT NULL DEFAULT 0 COMMENT '订单状态：0-待支付，1-已支付，2-已关闭', " +
	"`create_time` datetime NOT NULL COMMENT '创建时间', `timeout_minutes` int(11) NOT NULL DEFAULT 30 COMMENT '超时分钟数', " +
	"`update_time` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP COMMENT '更新时间', " +
	"PRIMARY KEY (`id`), KEY `idx_status_create_time` (`status`, `create_time`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT '订单表'"

// The acceptance case, end to end through the binary: a shop's database with
// golang-migrate's schema_migrations and its old order_info full of
// orders. executor migrate keeps golang-migrate's table and every order as
// they were, and orderTimeoutCloseJob then closes the due unpaid orders and
// nothing else.
func TestMigrateAShopDatabaseThenClose(t *testing.T) {
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	for _, s := range []string{
		`CREATE TABLE schema_migrations (version bigint NOT NULL, dirty boolean NOT NULL, PRIMARY KEY (version))`,
		`INSERT INTO schema_migrations VALUES (20240105093000, false)`,
		shopOrderInfo,
	} {
		_, err := db.ExecContext(ctx, s)
		require.NoError(t, err)
	}
	// 30 unpaid and due, 10 unpaid within their timeout, 10 paid long ago.
	for i := 1; i <= 50; i++ {
		status, age := 0, 45+i
		switch {
		case i > 40:
			status = 1
		case i > 30:
			age = i - 30
		}
		_, err := db.ExecContext(ctx, `INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes)
			VALUES (?, ?, ?, NOW() - INTERVAL ? MINUTE, 30)`, fmt.Sprintf("SHOP-%03d", i), 100+i, status, age)
		require.NoError(t, err)
	}
	snapshot := func() string {
		var rows []string
		require.NoError(t, db.SelectContext(ctx, &rows, `SELECT CONCAT_WS('|', id, order_no, user_id, status, create_time, timeout_minutes, update_time)
			FROM order_info ORDER BY id`))
		return strings.Join(rows, "\n")
	}
	before := snapshot()

	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}
	code, out, errOut := runCLI(t, env, "migrate", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ALTER TABLE order_info ADD COLUMN coupon_id BIGINT NULL, ALGORITHM=INSTANT;")
	require.Equal(t, before, snapshot())

	code, out, errOut = runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "0001_order_info: start at")
	require.Contains(t, out, "schema is up to date:")
	require.Equal(t, before, snapshot(), "every order as it was")
	var gm []string
	require.NoError(t, db.SelectContext(ctx, &gm, `SELECT CONCAT(version, '|', dirty) FROM schema_migrations`))
	require.Equal(t, []string{"20240105093000|0"}, gm, "golang-migrate's history untouched")

	code, out, errOut = runCLI(t, env, "migrate", "status")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "0 pending, 0 drifted, 0 missing (migrate adds them), 0 schema drift")

	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "scanned=30 closed=30 skipped_paid=0 skipped_locked=0 dead_lettered=0")
	var byStatus []string
	require.NoError(t, db.SelectContext(ctx, &byStatus, `SELECT CONCAT(status, ':', COUNT(*)) FROM order_info GROUP BY status ORDER BY status`))
	require.Equal(t, []string{"0:10", "1:10", "2:30"}, byStatus)
	var logs int
	require.NoError(t, db.GetContext(ctx, &logs, `SELECT COUNT(*) FROM order_close_log`))
	require.Equal(t, 30, logs)
}

func TestMigrateStatusCLI(t *testing.T) {
	db := dbtest.NewEmpty(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "MYSQL_MIGRATIONS_TABLE": "shop_executor_history"}
	code, out, _ := runCLI(t, env, "migrate", "status")
	require.Equal(t, 1, code, "pending steps: a deploy can gate on it")
	require.Contains(t, out, "history table: shop_executor_history")
	require.Contains(t, out, "0001_order_info")
	require.Contains(t, out, "pending")
	// A new database is not yet migrated, not drifted.
	all, err := migrations.All()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\nnot yet migrated (%d pending migrations): run `executor migrate`\n", len(all))), out)
	require.NotContains(t, out, "drift")

	code, _, errOut := runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)
	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 0, code, out)
	require.True(t, strings.HasSuffix(out, "\n0 pending, 0 drifted, 0 missing (migrate adds them), 0 schema drift\n"), out)
	// A column lost after the migration is missing (migrate adds it back), not drift.
	_, err = db.ExecContext(context.Background(), `ALTER TABLE order_info DROP COLUMN close_reason`)
	require.NoError(t, err)
	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "\nmissing: column order_info.close_reason")
	require.True(t, strings.HasSuffix(out, "\n0 pending, 0 drifted, 1 missing (migrate adds them), 0 schema drift\n"), out)
	code, _, errOut = runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)

	_, err = db.ExecContext(context.Background(), `UPDATE shop_executor_history SET checksum = REPEAT('f', 64) WHERE version = 1`)
	require.NoError(t, err)
	code, out, _ = runCLI(t, env, "migrate", "status", "-json")
	require.Equal(t, 1, code)
	var st struct {
		Table string `json:"historyTable"`
		Steps []struct {
			Version int    `json:"version"`
			State   string `json:"state"`
			Drift   bool   `json:"drift"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, "shop_executor_history", st.Table)
	require.Equal(t, 1, st.Steps[0].Version)
	require.True(t, st.Steps[0].Drift)
	require.Equal(t, "applied", st.Steps[0].State)

	code, _, errOut = runCLI(t, env, "migrate", "-lock-wait-timeout", "10ms")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "want at least 1s")
}

// -create-database makes the DSN's database when it is missing (make demo
// uses it for its own database).
func TestMigrateCreatesTheDatabase(t *testing.T) {
	db := dbtest.NewEmpty(t)
	name := db.Name + "_new"
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`") })
	dsn := strings.Replace(db.DSN, "/"+db.Name+"?", "/"+name+"?", 1)
	code, _, errOut := runCLI(t, map[string]string{"MYSQL_DSN": dsn}, "migrate")
	require.Equal(t, 1, code, "without the flag a missing database is an error")
	require.Contains(t, errOut, "Unknown database")
	code, _, errOut = runCLI(t, map[string]string{"MYSQL_DSN": dsn}, "migrate", "-create-database")
	require.Equal(t, 0, code, errOut)
	var n int
	require.NoError(t, db.GetContext(context.Background(), &n, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'order_info'`, name))
	require.Equal(t, 1, n)
}

// A user made for serve and run (rows only) stops migrate at its first
// CREATE: the error names what migrate needs besides, and the same user
// runs the job once another has migrated.
func TestMigrateNamesThePrivilegesItNeeds(t *testing.T) {
	db := dbtest.NewEmpty(t)
	dsn := db.NewUser(t, "SELECT, INSERT, UPDATE, DELETE ON *")
	code, _, errOut := runCLI(t, map[string]string{"MYSQL_DSN": dsn}, "migrate")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "CREATE command denied")
	require.Contains(t, errOut, "; fix: migrate needs SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER and INDEX on the DSN's database")
	require.Equal(t, 1, strings.Count(errOut, "; fix: "), "migrate's own fix, not the common one besides: %s", errOut)

	code, _, errOut = runCLI(t, map[string]string{"MYSQL_DSN": db.NewUser(t, "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON *")}, "migrate")
	require.Equal(t, 0, code, errOut)
	_, prefix := redistest.Client(t)
	code, out, errOut := runCLI(t, map[string]string{"MYSQL_DSN": dsn, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:", "XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
}

// A DSN naming a database that does not exist: migrate and migrate status
// say to create it; -dry-run -create-database creates nothing and prints
// the script migrate -create-database would run, CREATE DATABASE first,
// then the same plan as for an empty database.
func TestMigrateMissingDatabase(t *testing.T) {
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	name := db.Name + "_nx"
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`") })
	env := map[string]string{"MYSQL_DSN": strings.Replace(db.DSN, "/"+db.Name+"?", "/"+name+"?", 1)}
	hint := "database " + name + " does not exist; run `executor migrate -create-database` (or create it)"
	for _, args := range [][]string{{"migrate"}, {"migrate", "status"}, {"migrate", "-dry-run"}, {"deadletter", "list"}} {
		code, _, errOut := runCLI(t, env, args...)
		require.Equal(t, 1, code, args)
		require.Contains(t, errOut, hint, args)
	}

	code, script, errOut := runCLI(t, env, "migrate", "-dry-run", "-create-database")
	require.Equal(t, 0, code, errOut)
	var n int
	require.NoError(t, db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?`, name))
	require.Zero(t, n, "-dry-run created the database")
	header := "CREATE DATABASE IF NOT EXISTS `" + name + "` CHARACTER SET utf8mb4;\nUSE `" + name + "`;\n" +
		"-- database " + name + " does not exist yet: the plan below is that of an empty database\n"
	require.True(t, strings.HasPrefix(script, header), script)
	code, emptyPlan, errOut := runCLI(t, map[string]string{"MYSQL_DSN": db.DSN}, "migrate", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, emptyPlan, strings.TrimPrefix(script, header), "the plan of an empty database")
	require.Contains(t, emptyPlan, "CREATE TABLE")

	// An existing database: the same CREATE first, then its own plan.
	code, script, errOut = runCLI(t, map[string]string{"MYSQL_DSN": db.DSN}, "migrate", "-dry-run", "-create-database")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(script, "CREATE DATABASE IF NOT EXISTS `"+db.Name+"` CHARACTER SET utf8mb4;\nUSE `"+db.Name+"`;\n-- database "+db.Name+" exists"), script)
	require.True(t, strings.HasSuffix(script, emptyPlan), script)
}
