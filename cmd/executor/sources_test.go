package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/sql/migrations"
)

// sourcesEnv points the CLI at home (mysql.dsn) and two order sources,
// s0 and s1, of 3 tables each (order_info_0 ... order_info_2).
func sourcesEnv(t *testing.T, home *dbtest.DB, dbs []*dbtest.DB) map[string]string {
	t.Helper()
	_, prefix := redistest.Client(t)
	return map[string]string{"MYSQL_DSN": home.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(),
		"ORDER_SOURCES": fmt.Sprintf(`[{name: s0, dsn: %q, tables: "order_info_{0..2}"}, {name: s1, dsn: %q, maxOpenConns: 4, tables: "order_info_{0..2}"}]`,
			dbs[0].DSN, dbs[1].DSN)}
}

// order.sources end to end through the binary: executor migrate creates
// the executor's tables in mysql.dsn's database and in each source's, and
// one orderTimeoutCloseJob run closes the due orders of 2 databases x 3
// tables, naming each unit in its log.
func TestMigrateAndCloseOverSources(t *testing.T) {
	ctx := context.Background()
	home := dbtest.NewEmpty(t)
	dbs := []*dbtest.DB{dbtest.NewEmpty(t), dbtest.NewEmpty(t)}
	env := sourcesEnv(t, home, dbs)
	code, out, errOut := runCLI(t, env, "migrate")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "order source s0:\n")
	require.Contains(t, out, "order source s1:\n")
	for _, db := range append(dbs, home) {
		require.Equal(t, 1, db.Count(t, `SELECT COUNT(*) FROM information_schema.TABLES
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'order_close_run'`), "migrated: %s", db.Name)
	}

	// migrate status checks every source and the order tables it lists:
	// not split yet, they are missing.
	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "order source s1:\n")
	require.Contains(t, out, "\norder.sources: table order_info_2 is missing; fix: CREATE TABLE order_info_2 LIKE order_info\n")
	require.Contains(t, out, "0 pending, 0 drifted, 0 missing (migrate adds them), 0 schema drift, 6 problems of the order tables (order.sources)\n")

	for i, db := range dbs {
		_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 90, SKUs: 20, DueFraction: 1, CouponFraction: 0.3,
			OrderNoPrefix: fmt.Sprintf("S%d", i)})
		require.NoError(t, err)
		_, err = orderdemo.SplitTables(ctx, db.DB, 3)
		require.NoError(t, err)
	}
	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "over 6 units")
	for _, unit := range []string{"s0/order_info_0", "s0/order_info_2", "s1/order_info_1"} {
		require.Contains(t, out, unit+": scanned=30 closed=30 ")
	}
	require.Contains(t, out, "scanned=180 closed=180 skipped_paid=0 skipped_locked=0 dead_lettered=0")
	require.Contains(t, out, "units=6")
	for _, db := range dbs {
		require.Equal(t, 90, db.Count(t, `SELECT COUNT(*) FROM order_close_log`))
		require.Equal(t, 3, db.Count(t, `SELECT COUNT(*) FROM order_close_run WHERE order_source = ? AND closed = 30`,
			map[*dbtest.DB]string{dbs[0]: "s0", dbs[1]: "s1"}[db]))
	}

	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 0, code, out)
	// The lifecycle jobs run over the same units, in each source's tables.
	_, err := dbs[0].ExecContext(ctx, `UPDATE order_info_1 SET status = 3, pay_time = NOW(3) - INTERVAL 20 DAY,
		ship_time = NOW(3) - INTERVAL 15 DAY WHERE status = 2`)
	require.NoError(t, err)
	code, out, errOut = runCLI(t, env, "run", "orderAutoConfirmJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "orderAutoConfirmJob executor 0/1 over 6 units")
	require.Contains(t, out, "s0/order_info_1: scanned=30 completed=30 skipped=0 days=14 ")
	require.Contains(t, out, "s1/order_info_1: scanned=0 completed=0 skipped=0 days=14 ")
	require.Contains(t, out, "scanned=30 completed=30 skipped=0 days=14 seconds=")
	require.Equal(t, 30, dbs[0].Count(t, `SELECT COUNT(*) FROM order_info_1 WHERE status = 4`))
	_, err = dbs[1].ExecContext(ctx, "ALTER TABLE order_info_1 DROP INDEX idx_status_pay_time")
	require.NoError(t, err)
	code, out, _ = runCLI(t, env, "migrate", "status")
	require.Equal(t, 1, code, out)
	_, s1, _ := strings.Cut(out, "order source s1:\n")
	require.Contains(t, s1, "\norder.sources: index order_info_1.idx_status_pay_time is missing; "+
		"fix: ALTER TABLE order_info_1 ADD KEY idx_status_pay_time (status, pay_time)\n", out)
	code, out, _ = runCLI(t, env, "migrate", "status", "-json")
	require.Equal(t, 1, code, out)
	var st struct {
		Table   string `json:"historyTable"`
		Sources []struct {
			Name   string `json:"name"`
			Status struct {
				Problems []migrations.Problem `json:"problems"`
			} `json:"status"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, migrations.DefaultTable, st.Table, "mysql.dsn's fields as before")
	require.Len(t, st.Sources, 2)
	require.Equal(t, "s1", st.Sources[1].Name)
	require.Equal(t, []migrations.Problem{{Table: "order_info_1", Object: "index idx_status_pay_time", Detail: "is missing",
		Fix: "ALTER TABLE order_info_1 ADD KEY idx_status_pay_time (status, pay_time)", Source: migrations.SourcesSetting}},
		st.Sources[1].Status.Problems)
	// The start-up check refuses a source so, naming it and the table.
	code, out, errOut = runCLI(t, env, "run", "orderAutoConfirmJob")
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, errOut, "order source s1: the order tables listed in order.sources are not what the executor needs (1 to fix;")
}

// deadLetterRetryJob over order.sources through the binary: letters in
// the second source's database, naming its tables, are retried into those
// tables, and `deadletter list -source s1` shows each letter's table.
func TestDeadLetterRetryAndListOverSources(t *testing.T) {
	ctx := context.Background()
	home := dbtest.New(t)
	dbs := []*dbtest.DB{dbtest.New(t), dbtest.New(t)}
	env := sourcesEnv(t, home, dbs)
	for i, db := range dbs {
		_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 9, SKUs: 5, DueFraction: 1, OrderNoPrefix: fmt.Sprintf("S%d", i)})
		require.NoError(t, err)
		_, err = orderdemo.SplitTables(ctx, db.DB, 3)
		require.NoError(t, err)
	}
	s1 := dbs[1]
	letters := []string{
		ordertest.DeadLetter(t, s1.DB, ordertest.Unpaid(t, s1.DB, "order_info_1", false), "order_info_1"),
		ordertest.DeadLetter(t, s1.DB, ordertest.Unpaid(t, s1.DB, "order_info_2", false), "order_info_2"),
	}

	code, out, errOut := runCLI(t, env, "run", "deadLetterRetryJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "over 7 units", "the 6 units and mysql.dsn's Closer")
	require.Contains(t, out, "s1/order_info_1: found=1 closed=1 ")
	require.Contains(t, out, "s1/order_info_2: found=1 closed=1 ")
	require.Contains(t, out, "default/order_info: found=0 ")
	require.Contains(t, out, "found=2 closed=2 already_done=0 failed=0 parked=0 skipped=0")
	for i, table := range []string{"order_info_1", "order_info_2"} {
		require.Equal(t, 1, s1.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 2 AND order_no = ?", letters[i]))
	}

	code, out, errOut = runCLI(t, env, "deadletter", "list", "-source", "s1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "TABLE")
	require.Regexp(t, letters[1]+`\s+order_info_2\s+close\s+resolved\s+1\s+.*closed by deadLetterRetryJob`, out)
	require.Regexp(t, letters[0]+`\s+order_info_1\s+close\s+resolved`, out)
	for _, home := range []string{"", "default"} { // the metrics' label of mysql.dsn's letters
		code, out, _ = runCLI(t, env, "deadletter", "list", "-source", home)
		require.Equal(t, 0, code)
		require.NotContains(t, out, letters[0], "mysql.dsn's database has no letter")
	}
	// Without -source, stderr says whose letters these are and where the
	// others are: an empty list of mysql.dsn's is no empty list of s1's.
	code, out, errOut = runCLI(t, env, "deadletter", "list")
	require.Equal(t, 0, code)
	require.Equal(t, "no dead letters match\n", out)
	require.Equal(t, "reading mysql.dsn's database; the order sources in other databases: s0, s1 (add -source NAME)\n", errOut)
	_, _, errOut = runCLI(t, env, "deadletter", "list", "-source", "s1")
	require.Empty(t, errOut)
}

// A declared schema over order.sources with mysql.dsn on the first
// source's database, as sharded-orders.md advises: that database holds
// t_order_0 and t_order_1 (and their item tables), no t_order. migrate,
// migrate status and the start-up check look for the shop's tables there
// as the source names them, not as order.schema.table does; before, migrate
// and every start were refused, asking for t_order and t_order_item.
func TestDeclaredSchemaOverSourcesOnHome(t *testing.T) {
	closeDeclaredOverSources(t, [2][2]int{{0, 1}, {0, 1}})
}

// The layout sharded-orders.md shows: the order tables numbered across the
// databases, t_order_0 and t_order_1 in the first, t_order_2 and t_order_3
// in the second, each beside its item tables. Every command takes each
// source's tables as that source lists them.
func TestDeclaredSchemaOverTablesNumberedAcrossSources(t *testing.T) {
	closeDeclaredOverSources(t, [2][2]int{{0, 1}, {2, 3}})
}

// closeDeclaredOverSources gives each of two databases ordertest's foreign
// shop with the order tables t_order_N numbered as tables says (and their
// item tables, no t_order), two orders in the second table, one due; the
// sources s0 (mysql.dsn's database) and s1 list them. migrate, migrate
// status and one run of the close over the binary succeed, and the run
// closes the due order of each database.
func closeDeclaredOverSources(t *testing.T, tables [2][2]int) {
	ctx := context.Background()
	dbs := []*dbtest.DB{dbtest.NewEmpty(t), dbtest.NewEmpty(t)}
	for i, db := range dbs {
		require.NoError(t, ordertest.CreateForeignTables(ctx, db.DB))
		a, b := tables[i][0], tables[i][1]
		for _, stmt := range []string{
			fmt.Sprintf("CREATE TABLE t_order_%d LIKE t_order", a), fmt.Sprintf("CREATE TABLE t_order_%d LIKE t_order", b),
			fmt.Sprintf("CREATE TABLE t_order_item_%d LIKE t_order_item", a), fmt.Sprintf("CREATE TABLE t_order_item_%d LIKE t_order_item", b),
			"DROP TABLE t_order, t_order_item",
			fmt.Sprintf(`INSERT INTO t_order_%d (order_sn, member_id, order_status, created_at)
				VALUES ('S%d-1', 7, 0, NOW(3) - INTERVAL 1 HOUR), ('S%d-2', 7, 0, NOW(3))`, b, i, i),
			fmt.Sprintf("INSERT INTO t_order_item_%d (order_id, goods_sku, num) SELECT id, 3, 2 FROM t_order_%d", b, b),
			"INSERT INTO t_sku_stock (sku, stock, locked) VALUES (3, 100, 4)",
		} {
			_, err := db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
	}
	file := filepath.Join(t.TempDir(), "shop.yml")
	require.NoError(t, os.WriteFile(file, []byte(ordertest.ForeignYAML), 0o600))
	env := sourcesEnv(t, dbs[0], dbs)
	env["ORDER_SOURCES"] = fmt.Sprintf(`[{name: s0, dsn: %q, tables: "t_order_{%d..%d}"}, {name: s1, dsn: %q, tables: "t_order_{%d..%d}"}]`,
		dbs[0].DSN, tables[0][0], tables[0][1], dbs[1].DSN, tables[1][0], tables[1][1])

	code, out, errOut := runCLI(t, env, "-config", file, "migrate")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "order source s0: mysql.dsn's database, migrated above\n")
	code, out, errOut = runCLI(t, env, "-config", file, "migrate", "status")
	require.Equal(t, 0, code, out+errOut)
	code, out, errOut = runCLI(t, env, "-config", file, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "scanned=2 closed=2 skipped_paid=0 skipped_locked=0 dead_lettered=0")
	for i, db := range dbs {
		require.Equal(t, 1, db.Count(t, fmt.Sprintf("SELECT COUNT(*) FROM t_order_%d WHERE order_status = 4", tables[i][1])))
		require.Equal(t, 2, db.Count(t, "SELECT locked FROM t_sku_stock WHERE sku = 3"))
	}
}
