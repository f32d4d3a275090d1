package migrations_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/sql/migrations"
)

// shopOrderInfo is order_info as a shop's order service created it before
// the executor came: no coupon_id, no unique order_no, none of the
// executor's later columns.
const shopOrderInfo = "CREATE TABLE `order_info` (\n" +
	"`id` bigint(20) NOT NULL AUTO_INCREMENT COMMENT '订单ID',\n" +
	"`order_no` varchar(64) NOT NULL COMMENT '订单编号',\n" +
	"`user_id` bigint(20) NOT NULL COMMENT '用户ID',\n" +
	"`status` tinyint(4) NOT NULL DEFAULT 0 COMMENT '订单状态：0-待支付，1-已支付，2-已关闭',\n" +
	"`create_time` datetime NOT NULL COMMENT '创建时间',\n" +
	"`timeout_minutes` int(11) NOT NULL DEFAULT 30 COMMENT '超时分钟数',\n" +
	"`update_time` datetime NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP COMMENT '更新时间',\n" +
	"PRIMARY KEY (`id`),\n" +
	"KEY `idx_status_create_time` (`status`, `create_time`)\n" +
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT '订单表'"

// golang-migrate's history table, with one recorded version.
const golangMigrateTable = "CREATE TABLE schema_migrations (version bigint NOT NULL, dirty boolean NOT NULL, PRIMARY KEY (version))"

type bundle struct {
	ctx context.Context
	db  *dbtest.DB
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{ctx: context.Background(), db: dbtest.NewEmpty(t)}
}

func (b *bundle) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := b.db.ExecContext(b.ctx, s)
		require.NoError(t, err, s)
	}
}

func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return b.db.Count(t, query, args...)
}

// fingerprint is a table's rows over the given columns, and the SHOW
// CREATE TABLE lines of those columns and of the named indexes (all
// indexes when idx is empty): what must not change. (The tests read
// definitions with SHOW CREATE TABLE, not information_schema.COLUMNS, for
// the reason in store.go.)
func (b *bundle) fingerprint(t *testing.T, tbl string, cols string) string {
	t.Helper()
	return b.fingerprintIdx(t, tbl, cols, "")
}

func (b *bundle) fingerprintIdx(t *testing.T, tbl, cols, idx string) string {
	t.Helper()
	var rows []string
	require.NoError(t, b.db.SelectContext(b.ctx, &rows,
		fmt.Sprintf("SELECT CONCAT_WS('|', %s) FROM %s ORDER BY 1", cols, tbl)))
	var defs []string
	for _, line := range strings.Split(b.createTable(t, tbl), "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), ",")
		for _, c := range strings.Split(cols, ",") {
			if strings.HasPrefix(line, "`"+strings.TrimSpace(c)+"` ") {
				defs = append(defs, line)
			}
		}
		isIndex := strings.Contains(line, "KEY ")
		if isIndex && idx == "" {
			defs = append(defs, line)
		}
		for _, name := range strings.Split(idx, ",") {
			if isIndex && name != "" && (strings.Contains(line, "KEY `"+name+"` ") || (name == "PRIMARY" && strings.HasPrefix(line, "PRIMARY KEY"))) {
				defs = append(defs, line)
			}
		}
	}
	return strings.Join(rows, "\n") + "\n--\n" + strings.Join(defs, "\n")
}

// createTable is the table's SHOW CREATE TABLE ("" when it does not exist).
func (b *bundle) createTable(t *testing.T, tbl string) string {
	t.Helper()
	var name, create string
	err := b.db.QueryRowContext(b.ctx, "SHOW CREATE TABLE `"+tbl+"`").Scan(&name, &create)
	if err != nil && strings.Contains(err.Error(), "1146") {
		return ""
	}
	require.NoError(t, err)
	return create
}

// columnType is the column's type as SHOW CREATE TABLE prints it, "" when
// there is no such column.
func (b *bundle) columnType(t *testing.T, tbl, col string) string {
	t.Helper()
	for _, line := range strings.Split(b.createTable(t, tbl), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "`"+col+"`" {
			return f[1]
		}
	}
	return ""
}

func (b *bundle) migrator(t *testing.T, cfg migrations.Config) *migrations.Migrator {
	t.Helper()
	m, err := migrations.New(b.db.DB.DB, cfg)
	require.NoError(t, err)
	return m
}

func (b *bundle) tableExists(t *testing.T, name string) bool {
	return b.count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, name) == 1
}

func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	all, err := migrations.All()
	require.NoError(t, err)

	did, err := migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	require.Len(t, did, len(all))
	require.Equal(t, len(all), b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE LENGTH(checksum) = 64 AND carried_from IS NULL`))
	require.False(t, b.tableExists(t, "schema_migrations"), "never another tool's table name")

	did, err = migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	require.Empty(t, did, "a second apply changes nothing")
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))
}

// The acceptance case: golang-migrate keeps its schema_migrations here and
// the shop's order_info is the one it had before, with orders in it. Migrating
// leaves golang-migrate's table and every existing order value, column and
// index as they were, adds what the executor needs, and passes the check.
func TestMigrateNextToGolangMigrateAndAShopsOrderInfo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, golangMigrateTable, `INSERT INTO schema_migrations VALUES (20240101120000, false)`, shopOrderInfo)
	for i := 1; i <= 50; i++ {
		b.exec(t, fmt.Sprintf(`INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes)
			VALUES ('SHOP-%d', %d, %d, NOW() - INTERVAL %d MINUTE, 30)`, i, 1000+i, i%3, 10*i))
	}
	const seedCols = "id, order_no, user_id, status, create_time, timeout_minutes, update_time"
	const seedIdx = "PRIMARY,idx_status_create_time"
	before := b.fingerprintIdx(t, "order_info", seedCols, seedIdx)
	gmBefore := b.fingerprint(t, "schema_migrations", "version, dirty")

	var out bytes.Buffer
	res, err := b.migrator(t, migrations.Config{Out: &out}).Migrate(b.ctx)
	require.NoError(t, err, out.String())
	all, _ := migrations.All()
	require.Len(t, res.Applied, len(all))
	require.Empty(t, res.Carried, "golang-migrate's table is not ours: nothing carried")

	require.Equal(t, gmBefore, b.fingerprint(t, "schema_migrations", "version, dirty"), "golang-migrate's table untouched")
	require.NotEmpty(t, b.columnType(t, "schema_migrations", "dirty"))
	require.Equal(t, before, b.fingerprintIdx(t, "order_info", seedCols, seedIdx), "existing rows, columns and indexes unchanged")
	require.Equal(t, 50, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.Equal(t, "bigint(20)", b.columnType(t, "order_info", "coupon_id"))
	require.Equal(t, 1, b.count(t, `SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'order_info' AND INDEX_NAME = 'uk_order_no' AND NON_UNIQUE = 0`))
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))

	log := out.String()
	require.Contains(t, log, "order_info exists: adding what this step defines and it lacks")
	require.Contains(t, log, "ALTER TABLE order_info ADD COLUMN coupon_id BIGINT NULL")
	require.Contains(t, log, "ok (ALGORITHM=INSTANT")
	require.Contains(t, log, "ok (ALGORITHM=INPLACE, LOCK=NONE", "an index is built in place")
	require.Contains(t, log, "0001_order_info: start at ")
	require.Contains(t, log, "0001_order_info: done in ")
}

// Rails and others name their table schema_migrations too (version only).
func TestMigrateLeavesRailsHistoryAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE schema_migrations (version varchar(255) NOT NULL PRIMARY KEY)`,
		`INSERT INTO schema_migrations VALUES ('20230101000000'), ('20230202000000')`)
	before := b.fingerprint(t, "schema_migrations", "version")
	_, err := migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	require.Equal(t, before, b.fingerprint(t, "schema_migrations", "version"))
}

// An executor installed before the history table had its name recorded its
// steps in schema_migrations (version, name, applied_at). They are carried
// over once; the old table stays as it was.
func TestMigrateCarriesOverOurOlderHistoryOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	all, _ := migrations.All()
	b.exec(t, `DROP TABLE order_job_schema_migrations`,
		`CREATE TABLE schema_migrations (version INT NOT NULL, name VARCHAR(128) NOT NULL,
			applied_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (version))`)
	for _, m := range all[:len(all)-1] { // the newest step was never applied
		b.exec(t, fmt.Sprintf(`INSERT INTO schema_migrations (version, name) VALUES (%d, '%s')`, m.Version, m.Name))
	}
	b.exec(t, `INSERT INTO schema_migrations (version, name) VALUES (9999, 'not_ours')`)
	before := b.fingerprint(t, "schema_migrations", "version, name, applied_at")

	st, err := b.migrator(t, migrations.Config{}).Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, "carry", st.Steps[0].State)
	require.Equal(t, "pending", st.Steps[len(all)-1].State)

	res, err := b.migrator(t, migrations.Config{}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Len(t, res.Carried, len(all)-1)
	require.Equal(t, []int{all[len(all)-1].Version}, res.Applied)
	require.Equal(t, len(all)-1, b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE carried_from = 'schema_migrations'`))
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE version = 9999`))
	require.Equal(t, before, b.fingerprint(t, "schema_migrations", "version, name, applied_at"))

	// Once: with our history in place the old table is never read again.
	b.exec(t, `INSERT INTO schema_migrations (version, name) VALUES (9998, 'later')`)
	res, err = b.migrator(t, migrations.Config{}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Empty(t, res.Carried)
	require.Empty(t, res.Applied)
}

// A table shaped like ours whose rows name other steps is someone else's:
// nothing is carried and every step runs.
func TestMigrateCarriesOnlyOurSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `CREATE TABLE schema_migrations (version INT NOT NULL PRIMARY KEY, name VARCHAR(128) NOT NULL, applied_at DATETIME NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, 'create_users', NOW()), (2, 'create_products', NOW())`)
	res, err := migrations.New(b.db.DB.DB, migrations.Config{})
	require.NoError(t, err)
	r, err := res.Migrate(b.ctx)
	require.NoError(t, err)
	require.Empty(t, r.Carried)
	all, _ := migrations.All()
	require.Len(t, r.Applied, len(all))
}

// A step missing from the history runs although later steps are recorded
// (files added on two branches at once), and a table dropped since its
// step ran is created again.
func TestMigrateRunsGapsAndRestoresMissingTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	b.exec(t, `DROP TABLE order_dead_letter`, `DELETE FROM order_job_schema_migrations WHERE version = 8`,
		`DROP TABLE order_close_log`)
	err = b.migrator(t, migrations.Config{}).Check(b.ctx)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	require.Contains(t, err.Error(), "(table order_close_log, table order_dead_letter): run executor migrate")

	var out bytes.Buffer
	res, err := b.migrator(t, migrations.Config{Out: &out}).Migrate(b.ctx)
	require.NoError(t, err, out.String())
	require.Equal(t, []int{8}, res.Applied, "the gap below applied steps runs")
	require.Positive(t, res.Added)
	require.Contains(t, out.String(), "order_close_log is missing: creating it as the steps define it")
	require.True(t, b.tableExists(t, "order_close_log"))
	require.NotEmpty(t, b.columnType(t, "order_dead_letter", "status_reason"), "0008's table gets 0036's column")
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))
}

// A TIMESTAMP create_time changes its meaning with the session time zone:
// the migrator refuses, names it and the ALTER, and changes nothing.
func TestMigrateRefusesATimestampCreateTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, strings.Replace(shopOrderInfo, "`create_time` datetime NOT NULL", "`create_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP", 1))
	_, err := migrations.Apply(b.ctx, b.db.DB.DB)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Problems, 1)
	p := se.Problems[0]
	require.Equal(t, "order_info", p.Table)
	require.Equal(t, "column create_time", p.Object)
	require.Contains(t, p.Detail, "is TIMESTAMP; the executor needs DATETIME")
	require.Equal(t, "ALTER TABLE order_info MODIFY COLUMN create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", p.Fix)
	require.False(t, b.tableExists(t, "order_job_schema_migrations"), "nothing ran")
	require.False(t, b.tableExists(t, "order_item"))
	require.Empty(t, b.columnType(t, "order_info", "coupon_id"))

	// The printed fix works.
	b.exec(t, p.Fix)
	_, err = migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
}

// An index of the name the executor forces, over other columns, would make
// every scan use the wrong index (or fail): refused, with the fix.
func TestMigrateRefusesAnIndexOfOurNameOverOtherColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, strings.Replace(shopOrderInfo, "KEY `idx_status_create_time` (`status`, `create_time`)", "KEY `idx_status_create_time` (`create_time`)", 1))
	var out bytes.Buffer
	err := b.migrator(t, migrations.Config{}).DryRun(b.ctx, &out)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	require.Contains(t, out.String(), "-- PROBLEM: index order_info.idx_status_create_time is over (create_time); the executor needs KEY idx_status_create_time (status, create_time)")
	_, err = migrations.Apply(b.ctx, b.db.DB.DB)
	require.ErrorAs(t, err, &se)
	require.Contains(t, se.Problems[0].Fix, "ALTER TABLE order_info DROP INDEX idx_status_create_time, ADD KEY idx_status_create_time (status, create_time)")
	require.False(t, b.tableExists(t, "order_job_schema_migrations"))
}

// -dry-run prints every statement, history records included, and changes
// nothing.
func TestDryRunPrintsEveryStatementAndChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, shopOrderInfo)
	var out bytes.Buffer
	require.NoError(t, b.migrator(t, migrations.Config{}).DryRun(b.ctx, &out))
	script := out.String()
	require.Contains(t, script, "CREATE TABLE IF NOT EXISTS order_job_schema_migrations (")
	require.Contains(t, script, "ALTER TABLE order_info ADD COLUMN coupon_id BIGINT NULL, ALGORITHM=INSTANT;")
	require.Contains(t, script, "ALTER TABLE order_info ADD UNIQUE KEY uk_order_no (order_no), ALGORITHM=INPLACE, LOCK=NONE;")
	require.Contains(t, script, "CREATE TABLE IF NOT EXISTS order_close_log (")
	require.Contains(t, script, "INSERT INTO order_job_schema_migrations (version, name, checksum, applied_at, execution_ms, carried_from) VALUES (1, 'order_info', '")
	require.NotContains(t, script, "CREATE TABLE IF NOT EXISTS order_info", "the existing table is altered, not created")
	require.False(t, b.tableExists(t, "order_job_schema_migrations"))
	require.False(t, b.tableExists(t, "order_close_log"))

	// The script is what migrate then does: run by hand, it leaves nothing to do.
	for _, stmt := range strings.Split(script, ";\n") {
		var lines []string
		for _, l := range strings.Split(stmt, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		if s := strings.TrimSpace(strings.Join(lines, "\n")); s != "" {
			b.exec(t, s)
		}
	}
	res, err := b.migrator(t, migrations.Config{}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Zero(t, res.Added)
}

func TestStatusReportsPendingDriftAndUnknownSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.migrator(t, migrations.Config{Table: "my_history"})
	st, err := m.Status(b.ctx)
	require.NoError(t, err)
	all, _ := migrations.All()
	require.Equal(t, len(all), st.Pending(), "an empty database: all pending")

	_, err = m.Migrate(b.ctx)
	require.NoError(t, err)
	require.True(t, b.tableExists(t, "my_history"), "the configured history table")
	require.False(t, b.tableExists(t, migrations.DefaultTable))
	b.exec(t, `UPDATE my_history SET checksum = REPEAT('0', 64) WHERE version = 2`,
		`DELETE FROM my_history WHERE version = 3`,
		`INSERT INTO my_history (version, name, checksum, applied_at) VALUES (9999, 'from_the_future', REPEAT('a', 64), NOW())`,
		`ALTER TABLE order_info DROP INDEX idx_status_create_time`)
	st, err = m.Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Pending())
	require.Equal(t, 1, st.Drifted())
	byVersion := map[int]migrations.StepStatus{}
	for _, s := range st.Steps {
		byVersion[s.Version] = s
	}
	require.True(t, byVersion[2].Drift)
	require.Equal(t, "pending", byVersion[3].State)
	require.Equal(t, "unknown", byVersion[9999].State)
	require.Equal(t, "applied", byVersion[1].State)
	require.False(t, byVersion[1].AppliedAt.IsZero())
	require.Len(t, st.Problems, 1)
	require.Equal(t, "index idx_status_create_time", st.Problems[0].Object)
	require.True(t, st.Problems[0].Missing)
}

// A history table of the configured name that is not ours is never written.
func TestMigrateRefusesAForeignHistoryTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, golangMigrateTable)
	_, err := b.migrator(t, migrations.Config{Table: "schema_migrations"}).Migrate(b.ctx)
	require.ErrorContains(t, err, "table schema_migrations exists but is not an executor history table")
	require.False(t, b.tableExists(t, "order_info"))
}

// An ALTER the server can only do by copying the table stops the migration,
// saying so, unless AllowCopy.
func TestMigrateNeverCopiesATableSilently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fsys := fstest.MapFS{
		"0001_t.up.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS t (id INT NOT NULL, a INT NOT NULL, PRIMARY KEY (id));\n")},
		// A stored generated column can only be added by copying.
		"0002_t_widen.up.sql": {Data: []byte("ALTER TABLE t ADD COLUMN b BIGINT AS (a + 1) STORED;\n")},
	}
	m, err := migrations.NewFromFS(b.db.DB.DB, migrations.Config{}, fsys)
	require.NoError(t, err)
	b.exec(t, `CREATE TABLE t (id INT NOT NULL, a INT NOT NULL, PRIMARY KEY (id))`, `INSERT INTO t VALUES (1, 7)`)
	res, err := m.Migrate(b.ctx)
	var ce *migrations.CopyError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "0002_t_widen", ce.Step)
	require.Contains(t, err.Error(), "-allow-copy")
	require.Equal(t, []int{1}, res.Applied)
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE version = 2`))
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't' AND COLUMN_NAME = 'b'`))

	m, err = migrations.NewFromFS(b.db.DB.DB, migrations.Config{AllowCopy: true}, fsys)
	require.NoError(t, err)
	res, err = m.Migrate(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{2}, res.Applied)
	require.Equal(t, "bigint(20)", b.columnType(t, "t", "b"))
}

// An ALTER queued behind a long transaction would make every later query on
// the table queue behind it: the wait for the metadata lock is bounded, and
// the error says what happened.
func TestMigrateBoundsTheMetadataLockWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fsys := fstest.MapFS{
		"0001_t.up.sql":     {Data: []byte("CREATE TABLE IF NOT EXISTS t (id INT NOT NULL, PRIMARY KEY (id));\n")},
		"0002_t_col.up.sql": {Data: []byte("ALTER TABLE t ADD COLUMN c INT NULL;\n")},
	}
	b.exec(t, `CREATE TABLE t (id INT NOT NULL, PRIMARY KEY (id))`)
	tx, err := b.db.BeginTxx(b.ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()                               //nolint:errcheck // the transaction only holds a lock; nothing to keep
	_, err = tx.ExecContext(b.ctx, `SELECT * FROM t`) // holds t's metadata lock until the end of tx
	require.NoError(t, err)

	m, err := migrations.NewFromFS(b.db.DB.DB, migrations.Config{LockWaitTimeout: time.Second}, fsys)
	require.NoError(t, err)
	start := time.Now()
	_, err = m.Migrate(b.ctx)
	require.ErrorContains(t, err, "waited 1s for the table's metadata lock")
	require.Less(t, time.Since(start), 20*time.Second)
	require.NoError(t, tx.Rollback())
	_, err = m.Migrate(b.ctx)
	require.NoError(t, err)
}

// Indexes the executor names are added even when an equivalent one exists
// under another name (its queries force them by name); the plan says so.
func TestMigrateNotesAnEquivalentIndexUnderAnotherName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, strings.Replace(shopOrderInfo, "PRIMARY KEY (`id`),", "PRIMARY KEY (`id`), UNIQUE KEY `uniq_no` (`order_no`),", 1))
	var out bytes.Buffer
	require.NoError(t, b.migrator(t, migrations.Config{}).DryRun(b.ctx, &out))
	require.Contains(t, out.String(), "order_info already has uniq_no over (order_no), but the executor's queries name uk_order_no")
	require.Contains(t, out.String(), "RENAME INDEX uniq_no TO uk_order_no")

	b.exec(t, `ALTER TABLE order_info RENAME INDEX uniq_no TO uk_order_no`)
	out.Reset()
	require.NoError(t, b.migrator(t, migrations.Config{}).DryRun(b.ctx, &out))
	require.NotContains(t, out.String(), "ADD UNIQUE KEY uk_order_no")
}

// Executors starting together each run migrate: one runs the steps, the
// others wait for the lock and find nothing to do.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	errs := make(chan error, 4)
	applied := make(chan int, 4)
	for range 4 {
		go func() {
			did, err := migrations.Apply(b.ctx, b.db.DB.DB)
			applied <- len(did)
			errs <- err
		}()
	}
	total := 0
	for range 4 {
		require.NoError(t, <-errs)
		total += <-applied
	}
	all, _ := migrations.All()
	require.Equal(t, len(all), total, "each step ran once")
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
	if got := migrations.Explain(other); got != other { //nolint:errorlint // the very same error must come back
		t.Errorf("a deadlock got a schema hint: %v", got)
	}
	if migrations.Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
}

// The unique order number cannot be added over duplicates: the migration
// stops at that statement, naming it, and records nothing of the step.
func TestMigrateStopsAtDuplicateOrderNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, shopOrderInfo, `INSERT INTO order_info (order_no, user_id, create_time) VALUES ('DUP', 1, NOW()), ('DUP', 2, NOW())`)
	var out bytes.Buffer
	_, err := b.migrator(t, migrations.Config{Out: &out}).Migrate(b.ctx)
	require.ErrorContains(t, err, "0001_order_info: ALTER TABLE order_info ADD UNIQUE KEY uk_order_no (order_no)")
	require.ErrorContains(t, err, "Duplicate entry 'DUP'")
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations`))
	require.Equal(t, 2, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.False(t, b.tableExists(t, "order_item"), "nothing after the failed statement ran")
}

// An installation migrated before payment conflicts had payment ids keeps
// its rows, each now under 'legacy:' + order_no (the id Pay derives, so a
// repeated legacy notification still finds its row), owed; afterwards an
// order may have one row per distinct payment.
func TestPaymentConflictsKeyedByPaymentID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateBefore(t, "0061")
	b.exec(t, `INSERT INTO payment_conflict (order_no, pay_amount, paid_at) VALUES ('A-1', 12.50, NOW(3)), ('B-2', 3.00, NOW(3))`)

	res, err := b.migrator(t, migrations.Config{}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Contains(t, res.Applied, 61)
	require.Equal(t, "A-1|legacy:A-1|12.50|late|owed\nB-2|legacy:B-2|3.00|late|owed",
		strings.Split(b.fingerprint(t, "payment_conflict", "order_no, payment_id, pay_amount, reason, refund_status"), "\n--\n")[0])
	b.exec(t, `INSERT INTO payment_conflict (order_no, payment_id, pay_amount, paid_at) VALUES ('A-1', 'wx-2', 12.50, NOW(3))`)
	_, err = b.db.ExecContext(b.ctx, `INSERT INTO payment_conflict (order_no, payment_id, pay_amount, paid_at) VALUES ('A-1', 'legacy:A-1', 12.50, NOW(3))`)
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	require.EqualValues(t, 1062, me.Number, "one row per payment")
}

// The task table's index change (0090, 0091) runs on a live table with
// rows: each ALTER in place without locking writes (the migrator asks for
// LOCK=NONE and would stop with a CopyError otherwise), the rows as they
// were, and the table left with the indexes the executor names.
func TestTaskIndexChangeRunsOnlineOnATableWithRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateBefore(t, "0090")
	b.exec(t, `INSERT INTO job_delay_task (trace_id, biz_uuid, handler, execute_time, next_attempt_time, payload_json,
		status, created_at, updated_at, published_at)
		SELECT CONCAT('t', seq), CONCAT('b', seq), 'h', NOW(3), NOW(3) + INTERVAL seq SECOND, '{}',
		       ELT(1 + seq % 3, 'PENDING', 'RUNNING', 'DONE'), NOW(3), NOW(3), IF(seq % 2 = 0, NOW(3), NULL)
		FROM seq_1_to_20000`)
	const cols = "id, trace_id, status, next_attempt_time, published_at, updated_at"
	rows := b.fingerprintIdx(t, "job_delay_task", cols, "PRIMARY")

	var out bytes.Buffer
	res, err := b.migrator(t, migrations.Config{Out: &out}).Migrate(b.ctx)
	require.NoError(t, err, out.String())
	require.GreaterOrEqual(t, len(res.Applied), 2, out.String())
	require.Equal(t, []int{90, 91}, res.Applied[:2], "the index change first; later steps (0100, 0110, ...) follow")
	log := out.String()
	for _, stmt := range []string{
		"ALTER TABLE job_delay_task ADD INDEX idx_published_next (published_at, next_attempt_time)\n  ok (ALGORITHM=INPLACE, LOCK=NONE, ",
		"ALTER TABLE job_delay_task DROP INDEX idx_status_published, DROP INDEX idx_status_updated\n  ok (ALGORITHM=INPLACE, LOCK=NONE, ",
	} {
		require.Contains(t, log, stmt)
	}
	require.NotContains(t, log, "server's choice")
	require.Equal(t, rows, b.fingerprintIdx(t, "job_delay_task", cols, "PRIMARY"), "rows unchanged")
	require.ElementsMatch(t, []string{"PRIMARY", "uk_trace_id", "uk_biz_uuid", "idx_status_next_attempt", "idx_published_next"},
		b.indexNames(t, "job_delay_task"))
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))
}

// migrateBefore migrates the database with the steps whose files sort
// before the version prefix ("0090"): an installation migrated by an
// older executor.
func (b *bundle) migrateBefore(t *testing.T, version string) {
	t.Helper()
	before := fstest.MapFS{}
	names, err := fs.Glob(os.DirFS("."), "*.up.sql")
	require.NoError(t, err)
	for _, n := range names {
		if n < version {
			body, err := os.ReadFile(n)
			require.NoError(t, err)
			before[n] = &fstest.MapFile{Data: body}
		}
	}
	m, err := migrations.NewFromFS(b.db.DB.DB, migrations.Config{}, before)
	require.NoError(t, err)
	_, err = m.Migrate(b.ctx)
	require.NoError(t, err)
}

// Fulfilment flags written before 0139 keep their rows and name no order
// table (the console reads their orders in order_info); the column is
// added instantly, and flags written afterwards name theirs.
func TestFulfilmentFlagsNameTheirTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateBefore(t, "0139")
	b.exec(t, `INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
		VALUES (7, 'OLD-7', 3, NOW(3) - INTERVAL 8 DAY, NOW(3) - INTERVAL 1 DAY, NOW(3))`)
	const cols = "id, order_id, order_no, user_id, pay_time, deadline, flagged_at"
	rows := b.fingerprint(t, "order_fulfillment_overdue", cols)

	var out bytes.Buffer
	res, err := b.migrator(t, migrations.Config{Out: &out}).Migrate(b.ctx)
	require.NoError(t, err, out.String())
	require.Contains(t, res.Applied, 139)
	require.Contains(t, out.String(), "ALTER TABLE order_fulfillment_overdue ADD COLUMN order_table VARCHAR(64) NOT NULL DEFAULT ''\n  ok (ALGORITHM=INSTANT")
	require.Equal(t, rows, b.fingerprint(t, "order_fulfillment_overdue", cols), "rows unchanged")
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM order_fulfillment_overdue WHERE order_no = 'OLD-7' AND order_table = ''`))
	b.exec(t, `INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at, order_table)
		VALUES (7, 'NEW-7', 3, NOW(3) - INTERVAL 8 DAY, NOW(3) - INTERVAL 1 DAY, NOW(3), 't_order_7')`)
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))
}

func (b *bundle) indexNames(t *testing.T, tbl string) []string {
	t.Helper()
	var names []string
	require.NoError(t, b.db.SelectContext(b.ctx, &names, `SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, tbl))
	return names
}

// A DSN that names no database (…:3306/) is said so by migrate, not taken
// for another migrate holding the lock: the lock's name carries DATABASE(),
// which is then NULL.
func TestMigrateSaysTheDSNNamesNoDatabase(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("mysql", dbtest.ServerDSN())
	require.NoError(t, err)
	defer db.Close()
	m, err := migrations.New(db, migrations.Config{})
	require.NoError(t, err)
	_, err = m.Migrate(context.Background())
	require.EqualError(t, err, "migrations: the DSN names no database: "+
		"end it with the database's name (user:pass@tcp(host:port)/shop)")
}
