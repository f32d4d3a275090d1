package migrations_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/sql/migrations"
)

// foreignShop is a shop's own schema: its order table under the
// executor's default name order_info but shaped its own way (order_sn,
// order_status 0 unpaid / 4 cancelled, one timeout for all, no coupon id
// column of ours), items keyed by the order's id, stock with a locked
// column only, coupons as history rows matched by (member, coupon), and
// loyalty points on the member's row.
var foreignShop = []string{
	"CREATE TABLE order_info (\n" +
		"  id bigint NOT NULL AUTO_INCREMENT,\n" +
		"  order_sn varchar(32) NOT NULL COMMENT '订单编号',\n" +
		"  member_id bigint NOT NULL,\n" +
		"  order_status tinyint NOT NULL DEFAULT 0,\n" +
		"  created_at datetime NOT NULL,\n" +
		"  cancel_time datetime NULL,\n" +
		"  coupon_id bigint NULL,\n" +
		"  used_points int NOT NULL DEFAULT 0,\n" +
		"  PRIMARY KEY (id),\n" +
		"  UNIQUE KEY uk_order_sn (order_sn),\n" +
		"  KEY idx_status_created (order_status, created_at)\n" +
		") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT '订单表'",
	"CREATE TABLE order_goods (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, order_id bigint NOT NULL, goods_sku bigint NOT NULL, " +
		"num int NOT NULL, KEY idx_order_id (order_id)) ENGINE=InnoDB",
	"CREATE TABLE sku_stock (sku bigint NOT NULL PRIMARY KEY, lock_stock int NOT NULL DEFAULT 0) ENGINE=InnoDB",
	"CREATE TABLE coupon_history (id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, member_id bigint NOT NULL, coupon_id bigint NOT NULL, " +
		"use_status tinyint NOT NULL, KEY idx_member_coupon (member_id, coupon_id)) ENGINE=InnoDB",
	"CREATE TABLE member (id bigint NOT NULL PRIMARY KEY, integration int NOT NULL DEFAULT 0) ENGINE=InnoDB",
	"INSERT INTO order_info (order_sn, member_id, order_status, created_at, coupon_id, used_points) VALUES " +
		"('S1', 7, 0, NOW() - INTERVAL 2 HOUR, 3, 50), ('S2', 7, 1, NOW(), NULL, 0)",
	"INSERT INTO order_goods (order_id, goods_sku, num) VALUES (1, 100, 2), (2, 101, 1)",
	"INSERT INTO sku_stock VALUES (100, 2), (101, 0)",
	"INSERT INTO coupon_history (member_id, coupon_id, use_status) VALUES (7, 3, 1)",
	"INSERT INTO member VALUES (7, 10)",
}

var foreignTables = []string{"order_info", "order_goods", "sku_stock", "coupon_history", "member"}

// foreignSchema declares foreignShop.
func foreignSchema(t *testing.T) schema.Schema {
	t.Helper()
	s := schema.Schema{Declared: true,
		Orders: schema.Orders{Table: "order_info", ScanIndex: "idx_status_created", ID: "id", OrderNo: "order_sn", User: "member_id",
			Status: "order_status", CreateTime: "created_at", Unpaid: schema.Int(0), Closed: schema.Int(4), TimeoutMinutes: 30,
			CloseTime: "cancel_time"},
		Items: schema.Items{Table: "order_goods", Index: "idx_order_id", ByID: true, OrderColumn: "order_id", SKU: "goods_sku", Quantity: "num"},
		Stock: &schema.Stock{Table: "sku_stock", Key: "sku", Columns: []schema.StockColumn{{Name: "lock_stock", Subtract: true}}},
		Coupon: &schema.Coupon{Table: "coupon_history", Status: "use_status", Used: schema.Int(1), Unused: schema.Int(0),
			Match: []schema.Pair{{Column: "member_id", OrderColumn: "member_id"}, {Column: "coupon_id", OrderColumn: "coupon_id"}}},
		Extra: []schema.Giveback{{Table: "member", Column: "integration", Amount: "used_points", Key: "id", OrderKey: "member_id"}},
	}
	require.NoError(t, s.Validate())
	return s
}

// shopSteps are the steps that create or change order_info, order_item,
// inventory and user_coupon: what a declaration skips.
var shopSteps = []int{1, 2, 3, 4, 5, 6, 30, 31, 32, 33, 34, 40}

func (b *bundle) showCreates(t *testing.T, tables []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range tables {
		out[n] = b.createTable(t, n)
		require.NotEmpty(t, out[n], n)
	}
	return out
}

// The acceptance case of "nothing added to the shop's tables": with the
// shop's schema declared, migrate leaves every declared table exactly as it
// was (SHOW CREATE TABLE before and after, rows too), creates none of the
// executor's order tables, creates all of its own, records the shop steps
// as skipped, and the check passes; a second migrate does nothing.
func TestMigrateLeavesADeclaredShopSchemaAsItWas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, golangMigrateTable, `INSERT INTO schema_migrations VALUES (20240101120000, false)`)
	b.exec(t, foreignShop...)
	before := b.showCreates(t, foreignTables)
	rowsBefore := b.fingerprint(t, "order_info", "id, order_sn, member_id, order_status, created_at, cancel_time, coupon_id, used_points")
	gmBefore := b.fingerprint(t, "schema_migrations", "version, dirty")

	var out bytes.Buffer
	cfg := migrations.Config{Shop: foreignSchema(t), Out: &out}
	res, err := b.migrator(t, cfg).Migrate(b.ctx)
	require.NoError(t, err, out.String())
	require.Equal(t, shopSteps, res.Skipped)

	require.Equal(t, before, b.showCreates(t, foreignTables), "the shop's tables byte for byte")
	require.Equal(t, rowsBefore, b.fingerprint(t, "order_info", "id, order_sn, member_id, order_status, created_at, cancel_time, coupon_id, used_points"))
	require.Equal(t, gmBefore, b.fingerprint(t, "schema_migrations", "version, dirty"), "another tool's history untouched")
	for _, n := range []string{"order_item", "inventory", "user_coupon"} {
		require.False(t, b.tableExists(t, n), "the executor's own %s is not created", n)
	}
	for _, n := range []string{"order_close_log", "order_dead_letter", "order_close_run", "order_close_cursor", "job_delay_task",
		"order_outbox", "order_payment", "payment_conflict", "order_fulfillment_overdue", "console_session_revoked"} {
		require.True(t, b.tableExists(t, n), "the executor's own %s is created", n)
	}
	require.Equal(t, len(shopSteps), b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE skipped_for = 'order.schema' AND execution_ms = 0`))
	require.Contains(t, out.String(), "0001_order_info: skipped (order.schema declares the shop's tables; this step would change order_info)")
	require.NotContains(t, out.String(), "ALTER TABLE order_info")

	m := b.migrator(t, migrations.Config{Shop: foreignSchema(t)})
	require.NoError(t, m.Check(b.ctx))
	st, err := m.Status(b.ctx)
	require.NoError(t, err)
	require.True(t, st.Declared)
	require.Zero(t, st.Pending())
	require.Equal(t, len(shopSteps), st.Skipped())
	require.Empty(t, st.Problems)
	for _, s := range st.Steps {
		if slices.Contains(shopSteps, s.Version) {
			require.Equal(t, "skipped", s.State, s.Name)
			require.Equal(t, "order.schema", s.SkippedFor)
		} else {
			require.Equal(t, "applied", s.State, s.Name)
		}
	}

	res, err = b.migrator(t, cfg).Migrate(b.ctx)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Empty(t, res.Skipped)
	require.Equal(t, before, b.showCreates(t, foreignTables))
}

// No step changes both the shop's tables and the executor's own: a
// declaration skips whole steps.
func TestNoStepMixesShopAndOwnTables(t *testing.T) {
	t.Parallel()
	all, err := migrations.All()
	require.NoError(t, err)
	shop := []string{"order_info", "order_item", "inventory", "user_coupon"}
	var got []int
	for _, m := range all {
		tables := migrations.StepTables(m)
		n := 0
		for _, tbl := range tables {
			if slices.Contains(shop, tbl) {
				n++
			}
		}
		require.True(t, n == 0 || n == len(tables), "%s touches shop and own tables: %v", m.ID(), tables)
		if n > 0 {
			got = append(got, m.Version)
		}
	}
	require.Equal(t, shopSteps, got)
}

// migrateDeclared creates the foreign shop and migrates with it declared.
func (b *bundle) migrateDeclared(t *testing.T) {
	t.Helper()
	b.exec(t, foreignShop...)
	_, err := b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).Migrate(b.ctx)
	require.NoError(t, err)
}

// problemsOf runs the check and returns its problems by "table object".
func problemsOf(t *testing.T, b *bundle, s schema.Schema) map[string]migrations.Problem {
	t.Helper()
	err := b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx)
	var se *migrations.SchemaError
	require.True(t, errors.As(err, &se), "want a *SchemaError, got %v", err)
	out := map[string]migrations.Problem{}
	for _, p := range se.Problems {
		require.Equal(t, "order.schema", p.Source, p.String())
		out[p.Table+" "+p.Object] = p
	}
	return out
}

// A missing scan index and item index are named with the exact DDL; run as
// printed, the check passes.
func TestCheckNamesAMissingIndexWithItsDDL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_info DROP INDEX idx_status_created", "ALTER TABLE order_goods DROP INDEX idx_order_id",
		"ALTER TABLE order_info DROP INDEX uk_order_sn")

	probs := problemsOf(t, b, foreignSchema(t))
	require.Len(t, probs, 3, "%v", probs)
	scan := probs["order_info index idx_status_created"]
	require.Equal(t, "CREATE INDEX `idx_status_created` ON `order_info` (`order_status`, `created_at`, `id`) ALGORITHM=INPLACE LOCK=NONE", scan.Fix)
	items := probs["order_goods index idx_order_id"]
	require.Equal(t, "CREATE INDEX `idx_order_id` ON `order_goods` (`order_id`) ALGORITHM=INPLACE LOCK=NONE", items.Fix)
	uk := probs["order_info unique key over order_sn"]
	require.Equal(t, "CREATE UNIQUE INDEX `uk_order_sn` ON `order_info` (`order_sn`) ALGORITHM=INPLACE LOCK=NONE", uk.Fix)
	require.Contains(t, scan.String(), "index order_info.idx_status_created is missing")
	require.True(t, strings.HasPrefix(uk.String(), "unique key over order_sn of order_info is missing (order.schema.orderNo)"), uk.String())

	st, err := b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).Status(b.ctx)
	require.NoError(t, err)
	require.Len(t, st.Problems, 3, "status lists them too")
	var script bytes.Buffer
	err = b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).DryRun(b.ctx, &script)
	require.ErrorAs(t, err, new(*migrations.SchemaError))
	require.Contains(t, script.String(), "\n-- index order_goods.idx_order_id is missing (the close reads a page's lines by their order); fix: "+items.Fix+"\n",
		"the dry run's script ends with them, as comments")

	b.exec(t, scan.Fix, items.Fix, uk.Fix)
	require.NoError(t, b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).Check(b.ctx))
}

// An index of the declared name over other columns is named with a new
// index to create and the setting to change; one that already serves is
// pointed at.
func TestCheckNamesAScanIndexOverOtherColumns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_info DROP INDEX idx_status_created, ADD INDEX idx_status_created (created_at)")
	p := problemsOf(t, b, foreignSchema(t))["order_info index idx_status_created"]
	require.Contains(t, p.Detail, "is over (created_at)")
	require.Equal(t, "CREATE INDEX `idx_order_status_created_at_id` ON `order_info` (`order_status`, `created_at`, `id`) ALGORITHM=INPLACE LOCK=NONE, "+
		"then set order.schema.scanIndex: idx_order_status_created_at_id", p.Fix)

	b.exec(t, "ALTER TABLE order_info ADD INDEX idx_scan (order_status, created_at)")
	p = problemsOf(t, b, foreignSchema(t))["order_info index idx_status_created"]
	require.True(t, strings.HasPrefix(p.Fix, "set order.schema.scanIndex: idx_scan"), p.Fix)
}

// A missing column, a column of the wrong kind and a missing table are
// named, each with its fix.
func TestCheckNamesMissingColumnsTypesAndTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_goods MODIFY COLUMN num varchar(8) NOT NULL", "ALTER TABLE order_info DROP COLUMN cancel_time",
		"ALTER TABLE order_goods MODIFY COLUMN goods_sku varchar(20) NOT NULL")
	s := foreignSchema(t)
	s.Orders.Status = "state"
	s.Coupon.Used, s.Coupon.Unused = schema.Value{}, schema.Value{}
	used, err := schema.ParseValue("'USED'")
	require.NoError(t, err)
	unused, err := schema.ParseValue("'UNUSED'")
	require.NoError(t, err)
	s.Coupon.Used, s.Coupon.Unused = used, unused
	s.Extra[0].Table = "member_account"

	probs := problemsOf(t, b, s)
	state := probs["order_info column state"]
	require.Equal(t, "is missing", state.Detail)
	require.Contains(t, state.Fix, "name the column in order.schema.status (order_info has id, order_sn, member_id, order_status")
	closeTime := probs["order_info column cancel_time"]
	require.Equal(t, "ALTER TABLE `order_info` ADD COLUMN `cancel_time` DATETIME(3) NULL, ALGORITHM=INSTANT; or set order.schema.closeTime to '' (none)", closeTime.Fix)
	num := probs["order_goods column num"]
	require.Equal(t, "is VARCHAR(8); order.schema.items.quantity needs an integer type or DECIMAL", num.Detail)
	status := probs["coupon_history column use_status"]
	require.Equal(t, "is TINYINT; order.schema.coupon.status needs a text type or ENUM", status.Detail)
	table := probs["member_account table member_account"]
	require.Equal(t, "is missing", table.Detail)
	require.Contains(t, table.Fix, "order.schema.givebacks")
	sku := probs["order_goods column goods_sku"]
	require.Equal(t, "is VARCHAR(20) but sku_stock.sku, which the close compares it with, is BIGINT", sku.Detail)
	require.Equal(t, "name columns of one kind in order.schema.items.sku and order.schema.stock.key", sku.Fix)
	require.Len(t, probs, 6, "%v", probs)
}

// TestCheckNamesAMisnamedUserColumn: order.schema.user is optional, but a
// name the table lacks made the console's order view fail with Error 1054
// while the check passed; it is reported like the other columns, with
// user: "" (none) as the way out.
func TestCheckNamesAMisnamedUserColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	s := foreignSchema(t)
	s.Orders.User = "userid"
	probs := problemsOf(t, b, s)
	user := probs["order_info column userid"]
	require.Equal(t, "is missing", user.Detail)
	require.Contains(t, user.Fix, "name the column in order.schema.user (order_info has id, order_sn, member_id")
	require.True(t, strings.HasSuffix(user.Fix, "; or set order.schema.user to '' (none)"), user.Fix)
	require.Len(t, probs, 1, "%v", probs)

	s.Orders.User = ""
	require.NoError(t, b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx))
}

// TestCheckOffersNoStockOrCoupon: stock.table and coupon.table default to
// the executor's own inventory and user_coupon, which a shop declaring its
// schema rarely has; their "is missing" fix offers none ("") as the way
// out, as the optional columns' fixes do.
func TestCheckOffersNoStockOrCoupon(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	s := foreignSchema(t)
	s.Stock.Table, s.Coupon.Table = "inventory_x", "user_coupon_x"
	probs := problemsOf(t, b, s)
	stock := probs["inventory_x table inventory_x"]
	require.Equal(t, "is missing", stock.Detail)
	require.True(t, strings.HasSuffix(stock.Fix, "; or set order.schema.stock.table to '' (a close gives no stock back)"), stock.Fix)
	coupon := probs["user_coupon_x table user_coupon_x"]
	require.Equal(t, "is missing", coupon.Detail)
	require.True(t, strings.HasSuffix(coupon.Fix, "; or set order.schema.coupon.table to '' (orders carry no coupon)"), coupon.Fix)

	s.Stock, s.Coupon = nil, nil
	require.NoError(t, b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx))
}

// TestCheckNamesAStatusTheEnumLacks: a declared status value an ENUM
// column cannot hold made every scan find nothing, silently; the check
// names the value and the members, ignoring case as the server does.
func TestCheckNamesAStatusTheEnumLacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_info ADD COLUMN state ENUM('WAIT_PAY','PAID','CANCELLED') NOT NULL DEFAULT 'WAIT_PAY'",
		"ALTER TABLE coupon_history MODIFY COLUMN use_status ENUM('UNUSED','USED') NOT NULL DEFAULT 'UNUSED'")
	value := func(v string) schema.Value {
		val, err := schema.ParseValue(v)
		require.NoError(t, err)
		return val
	}
	s := foreignSchema(t)
	s.Orders.Status, s.Orders.Unpaid, s.Orders.Closed = "state", value("WAIT_PAYY"), value("CANCELED")
	s.Coupon.Used, s.Coupon.Unused = value("USED"), value("unused")

	probs := problemsOf(t, b, s)
	state := probs["order_info column state"]
	require.Equal(t, "is an ENUM of wait_pay, paid, cancelled, without 'WAIT_PAYY' (order.schema.unpaid) nor 'CANCELED' (order.schema.closed): no row can hold it", state.Detail)
	require.Equal(t, "set order.schema.unpaid and order.schema.closed to members of the ENUM", state.Fix)
	require.NotContains(t, probs, "coupon_history column use_status", "USED and unused are members")

	s.Orders.Unpaid, s.Orders.Closed = value("wait_pay"), value("CANCELLED")
	probs = problemsOf(t, b, s) // the scan index is over order_status, not state
	require.NotContains(t, probs, "order_info column state")
	require.Contains(t, probs, "order_info index idx_status_created")
}

// Steps skipped for a declaration that is gone stop a plain migrate, which
// would otherwise create and change the order tables; -run-skipped runs
// them, and status shows each state.
func TestSkippedStepsRunOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, foreignShop...)
	b.exec(t, "RENAME TABLE order_info TO t_order")
	s := foreignSchema(t)
	s.Orders.Table = "t_order"
	before := b.showCreates(t, []string{"t_order"})
	st, err := b.migrator(t, migrations.Config{Shop: s}).Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, "skip", st.Steps[0].State, "the next migrate records it as skipped")
	_, err = b.migrator(t, migrations.Config{Shop: s}).Migrate(b.ctx)
	require.NoError(t, err)
	require.False(t, b.tableExists(t, "order_info"))

	_, err = b.migrator(t, migrations.Config{}).Migrate(b.ctx)
	var skipped *migrations.SkippedError
	require.ErrorAs(t, err, &skipped)
	require.ErrorContains(t, err, "run `executor migrate -run-skipped`")
	require.False(t, b.tableExists(t, "order_info"), "nothing ran")
	st, err = b.migrator(t, migrations.Config{}).Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, len(shopSteps), st.Pending(), "without the declaration, skipped steps wait")

	_, err = migrations.New(b.db.DB.DB, migrations.Config{Shop: s, RunSkipped: true})
	require.ErrorContains(t, err, "remove the declaration first")
	res, err := b.migrator(t, migrations.Config{RunSkipped: true}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Equal(t, shopSteps, res.Applied)
	require.True(t, b.tableExists(t, "order_info"))
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE skipped_for IS NOT NULL`))
	require.NoError(t, b.migrator(t, migrations.Config{}).Check(b.ctx))
	require.Equal(t, before, b.showCreates(t, []string{"t_order"}))
}

// A history table made before skipped_for existed gets the column when a
// step is first recorded as skipped.
func TestOlderHistoryGainsSkippedFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, foreignShop...)
	b.exec(t, `CREATE TABLE order_job_schema_migrations (version INT NOT NULL, name VARCHAR(128) NOT NULL,
		checksum CHAR(64) CHARACTER SET ascii NOT NULL, applied_at DATETIME(3) NOT NULL,
		execution_ms BIGINT NOT NULL DEFAULT 0, carried_from VARCHAR(64) NULL, PRIMARY KEY (version))`)
	var script bytes.Buffer
	require.NoError(t, b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).DryRun(b.ctx, &script))
	require.Contains(t, script.String(), "ALTER TABLE order_job_schema_migrations ADD COLUMN skipped_for")
	require.Contains(t, script.String(), "-- 0040_order_info_pay_amount: skipped: order.schema declares the shop's tables (order_info); recorded, not run")
	require.NotContains(t, script.String(), "ALTER TABLE order_info")

	_, err := b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).Migrate(b.ctx)
	require.NoError(t, err)
	require.Equal(t, len(shopSteps), b.count(t, `SELECT COUNT(*) FROM order_job_schema_migrations WHERE skipped_for = 'order.schema'`))
}

// With outbox compensation the stock and coupon tables live with other
// services: the check leaves them out, but still needs the order's own
// coupon columns.
func TestCheckLeavesStockAndCouponTablesToEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "DROP TABLE sku_stock", "DROP TABLE coupon_history")
	probs := problemsOf(t, b, foreignSchema(t))
	require.Contains(t, probs, "sku_stock table sku_stock")
	require.Contains(t, probs, "coupon_history table coupon_history")

	require.NoError(t, b.migrator(t, migrations.Config{Shop: foreignSchema(t), GivebacksByEvents: true}).Check(b.ctx))
	b.exec(t, "ALTER TABLE order_info DROP COLUMN coupon_id")
	err := b.migrator(t, migrations.Config{Shop: foreignSchema(t), GivebacksByEvents: true}).Check(b.ctx)
	require.ErrorContains(t, err, "column order_info.coupon_id is missing; fix: name the column in order.schema.coupon.match")
}

// migrate does its own work whatever the shop's tables lack, then fails
// naming what they lack, as the start-up check would.
func TestMigrateCreatesItsTablesThenNamesTheShopsProblems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, foreignShop...)
	b.exec(t, "ALTER TABLE order_goods DROP INDEX idx_order_id")
	_, err := b.migrator(t, migrations.Config{Shop: foreignSchema(t)}).Migrate(b.ctx)
	require.ErrorContains(t, err, "the shop's tables declared in order.schema are not what the close needs (1 to fix; "+
		"executor migrate never changes them, the fixes are for a DBA or the configuration):\n  index order_goods.idx_order_id is missing")
	require.True(t, b.tableExists(t, "order_close_log"))
	require.Equal(t, []string{"PRIMARY"}, b.indexNames(t, "order_goods"), "nothing added to the shop's table")
}

// A data step of a shop table is skipped like its DDL: it would change
// the shop's rows.
func TestDeclarationSkipsADataStepOfAShopTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, foreignShop...)
	fsys := fstest.MapFS{
		"0001_order_info.up.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS order_info (id BIGINT NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB;\n")},
		"0002_fix.up.sql":        {Data: []byte("UPDATE order_info SET order_status = 9;\n")},
		"0003_own.up.sql":        {Data: []byte("CREATE TABLE IF NOT EXISTS own_t (id BIGINT NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB;\n")},
	}
	m, err := migrations.NewFromFS(b.db.DB.DB, migrations.Config{Shop: foreignSchema(t)}, fsys)
	require.NoError(t, err)
	before := b.fingerprint(t, "order_info", "id, order_status")
	res, err := m.Migrate(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, res.Skipped)
	require.Equal(t, []int{3}, res.Applied)
	require.Equal(t, before, b.fingerprint(t, "order_info", "id, order_status"))
}

// A declaration naming one of the executor's own tables is refused: the
// close would write the shop's stock into the executor's close log.
func TestDeclarationOfAnExecutorTableIsRefused(t *testing.T) {
	t.Parallel()
	s := foreignSchema(t)
	s.Stock.Table = "Order_Close_Log"
	_, err := migrations.New(nil, migrations.Config{Shop: s})
	require.ErrorContains(t, err, "order.schema names Order_Close_Log, one of the executor's own tables")
	s.Stock.Table = "inventory" // the executor's default name, the shop's table
	_, err = migrations.New(nil, migrations.Config{Shop: s})
	require.NoError(t, err)
}

// The indexes the close forces on a declared schema are checked too: a
// stock.index not over stock.key (the config's default PRIMARY on a table
// keyed by a unique column beside its id) points at the index that is, a
// coupon.index not over the matched columns is named, and a giveback's key
// that is not the primary key is refused, since the close finds those rows
// by FORCE INDEX (PRIMARY).
func TestCheckNamesTheIndexesTheCloseForces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE sku_stock DROP PRIMARY KEY, ADD COLUMN id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_sku (sku)",
		"ALTER TABLE member DROP PRIMARY KEY, ADD COLUMN mid bigint NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_id (id)")
	sch := foreignSchema(t)
	sch.Stock.Index = "PRIMARY"
	sch.Coupon.Index = "idx_other"
	probs := problemsOf(t, b, sch)
	require.Len(t, probs, 3, "%v", probs)
	stock := probs["sku_stock index PRIMARY"]
	require.True(t, strings.HasPrefix(stock.Fix, "set order.schema.stock.index: uk_sku"), stock.Fix)
	coupon := probs["coupon_history index idx_other"]
	require.True(t, strings.HasPrefix(coupon.Fix, "set order.schema.coupon.index: idx_member_coupon"), coupon.Fix)
	member := probs["member primary key over id"]
	require.Equal(t, "name the table's primary key in order.schema.givebacks", member.Fix)

	sch.Stock.Index, sch.Coupon.Index = "uk_sku", "idx_member_coupon"
	b.exec(t, "ALTER TABLE member DROP PRIMARY KEY, DROP COLUMN mid, ADD PRIMARY KEY (id)")
	require.NoError(t, b.migrator(t, migrations.Config{Shop: sch}).Check(b.ctx))
}

// A shop keeping each order's deadline names it in order.schema.dueTime:
// the check then wants that column, a date-time, and the scan index led
// by (status, dueTime), and no creation time at all.
func TestCheckNamesTheDueTimesTypeAndIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	s := foreignSchema(t)
	s.Orders.CreateTime, s.Orders.TimeoutMinutes = "", 0
	s.Orders.DueTime, s.Orders.ScanIndex = "expire_at", "idx_status_expire"
	require.NoError(t, s.Validate())

	probs := problemsOf(t, b, s)
	require.Len(t, probs, 1, "%v", probs)
	missing := probs["order_info column expire_at"]
	require.Equal(t, "is missing", missing.Detail)
	require.Contains(t, missing.Fix, "name the column in order.schema.dueTime")

	b.exec(t, "ALTER TABLE order_info ADD COLUMN expire_at varchar(20) NULL")
	probs = problemsOf(t, b, s)
	require.Len(t, probs, 2, "%v", probs)
	require.Equal(t, "is VARCHAR(20); order.schema.dueTime needs DATETIME or TIMESTAMP", probs["order_info column expire_at"].Detail)
	scan := probs["order_info index idx_status_expire"]
	require.Equal(t, "is missing (the scan walks unpaid orders by due time and id)", scan.Detail)
	require.Equal(t, "CREATE INDEX `idx_status_expire` ON `order_info` (`order_status`, `expire_at`, `id`) ALGORITHM=INPLACE LOCK=NONE", scan.Fix)

	b.exec(t, "ALTER TABLE order_info MODIFY COLUMN expire_at datetime NULL", scan.Fix)
	require.NoError(t, b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx))

	// The creation time's index does not serve a scan by deadline; the
	// deadline's does, and is named.
	s.Orders.ScanIndex = "idx_status_created"
	scan = problemsOf(t, b, s)["order_info index idx_status_created"]
	require.Equal(t, "is missing or not over (order_status, expire_at, id) (the scan walks unpaid orders by due time and id)", scan.Detail)
	require.True(t, strings.HasPrefix(scan.Fix, "set order.schema.scanIndex: idx_status_expire"), scan.Fix)
}

// order.schema.timeUnit applies to every time column the schema names:
// DATETIME or TIMESTAMP for datetime, INT or BIGINT for epochSeconds,
// BIGINT for epochMillis. A column of the other kind is refused with the
// unit it fits; a close stamp the shop may add is added in the unit.
func TestCheckTimeColumnsFollowTheTimeUnit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_info ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0, ADD COLUMN created_s INT UNSIGNED NOT NULL DEFAULT 0, "+
		"ADD COLUMN cancel_ms BIGINT NULL, ADD COLUMN created_small SMALLINT NOT NULL DEFAULT 0, "+
		"ADD KEY idx_status_created_ms (order_status, created_ms), ADD KEY idx_status_created_s (order_status, created_s), "+
		"ADD KEY idx_status_created_small (order_status, created_small)")
	epoch := func(unit schema.TimeUnit, create, closeTime string) schema.Schema {
		s := foreignSchema(t)
		s.Orders.TimeUnit, s.Orders.CreateTime, s.Orders.CloseTime = unit, create, closeTime
		if create == "created_at" {
			s.Orders.ScanIndex = "idx_status_created"
		} else {
			s.Orders.ScanIndex = "idx_status_" + create
		}
		return s
	}

	probs := problemsOf(t, b, epoch(schema.DateTime, "created_ms", "cancel_time"))
	require.Len(t, probs, 1, "%v", probs)
	p := probs["order_info column created_ms"]
	require.Equal(t, "is BIGINT; order.schema.createTime with order.schema.timeUnit: datetime needs DATETIME or TIMESTAMP", p.Detail)
	require.Equal(t, "set order.schema.timeUnit: epochMillis (or epochSeconds), if created_ms holds Unix epoch times", p.Fix)
	probs = problemsOf(t, b, epoch(schema.DateTime, "created_s", "cancel_time"))
	require.Equal(t, "set order.schema.timeUnit: epochSeconds, if created_s holds Unix epoch times", probs["order_info column created_s"].Fix)
	probs = problemsOf(t, b, epoch(schema.DateTime, "created_small", "cancel_time"))
	require.Equal(t, "is SMALLINT; order.schema.createTime needs DATETIME or TIMESTAMP", probs["order_info column created_small"].Detail)

	millis := epoch(schema.EpochMillis, "created_at", "cancel_time")
	millis.Orders.UpdateTime = "updated_ms"
	probs = problemsOf(t, b, millis)
	require.Len(t, probs, 3, "%v", probs)
	p = probs["order_info column created_at"]
	require.Equal(t, "is DATETIME; order.schema.createTime with order.schema.timeUnit: epochMillis needs BIGINT", p.Detail)
	require.Equal(t, "set order.schema.timeUnit: datetime (or leave it out)", p.Fix)
	require.Equal(t, "is DATETIME; order.schema.closeTime with order.schema.timeUnit: epochMillis needs BIGINT",
		probs["order_info column cancel_time"].Detail)
	add := probs["order_info column updated_ms"]
	require.Equal(t, "ALTER TABLE `order_info` ADD COLUMN `updated_ms` BIGINT NULL, ALGORITHM=INSTANT; or set order.schema.updateTime to '' (none)", add.Fix)

	probs = problemsOf(t, b, epoch(schema.EpochMillis, "created_s", "cancel_ms"))
	require.Len(t, probs, 1, "%v", probs)
	p = probs["order_info column created_s"]
	require.Equal(t, "is INT; order.schema.createTime with order.schema.timeUnit: epochMillis needs BIGINT", p.Detail)
	require.Equal(t, "set order.schema.timeUnit: epochSeconds, if created_s holds Unix epoch times", p.Fix)
	probs = problemsOf(t, b, epoch(schema.EpochSeconds, "created_small", "cancel_ms"))
	require.Equal(t, "is SMALLINT; order.schema.createTime with order.schema.timeUnit: epochSeconds needs INT or BIGINT",
		probs["order_info column created_small"].Detail)
	require.Equal(t, "name a column of that kind in order.schema.createTime", probs["order_info column created_small"].Fix)

	b.exec(t, add.Fix[:strings.Index(add.Fix, ";")])
	require.NoError(t, b.migrator(t, migrations.Config{Shop: epoch(schema.EpochMillis, "created_ms", "cancel_ms")}).Check(b.ctx))
	require.NoError(t, b.migrator(t, migrations.Config{Shop: epoch(schema.EpochSeconds, "created_s", "cancel_ms")}).Check(b.ctx))
	require.NoError(t, b.migrator(t, migrations.Config{Shop: epoch(schema.EpochSeconds, "created_ms", "cancel_ms")}).Check(b.ctx),
		"seconds fit a BIGINT too")
}

// TestCheckNamesASoftDeleteColumnItsLiveValueDoesNotSuit: the declared
// soft-delete column must exist and hold its live value as the close
// compares it (an integer flag, a text flag, NULL in a nullable column, a
// member of an ENUM); otherwise no order would ever be closed, or every
// scanned row converted.
func TestCheckNamesASoftDeleteColumnItsLiveValueDoesNotSuit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "ALTER TABLE order_info ADD COLUMN is_deleted TINYINT NOT NULL DEFAULT 0, ADD COLUMN del_flag CHAR(1) NOT NULL DEFAULT '0', "+
		"ADD COLUMN deleted_at DATETIME NULL, ADD COLUMN row_state ENUM('LIVE','GONE') NOT NULL DEFAULT 'LIVE'")
	value := func(v string) schema.Value {
		val, err := schema.ParseValue(v)
		require.NoError(t, err)
		return val
	}
	with := func(col, live string) schema.Schema {
		s := foreignSchema(t)
		s.Orders.SoftDelete = schema.SoftDelete{Column: col}
		if live != "" {
			s.Orders.SoftDelete.Live = value(live)
		}
		return s
	}
	for _, ok := range []struct{ col, live string }{{"is_deleted", "0"}, {"del_flag", "'0'"}, {"deleted_at", ""}, {"row_state", "live"}} {
		require.NoError(t, b.migrator(t, migrations.Config{Shop: with(ok.col, ok.live)}).Check(b.ctx), "%s = %s", ok.col, ok.live)
	}
	for _, c := range []struct{ col, live, object, detail, fix string }{
		{"is_delete", "0", "column is_delete", "is missing",
			"name the column in order.schema.softDelete.column (order_info has id, order_sn, member_id, order_status, created_at, cancel_time, " +
				"coupon_id, used_points, is_deleted, del_flag, deleted_at, row_state); or set order.schema.softDelete.column to '' (none)"},
		{"del_flag", "0", "column del_flag", "is CHAR(1) but order.schema.softDelete.liveValue 0 is an integer",
			`quote the value to compare it as a text: order.schema.softDelete.liveValue: "'0'"`},
		{"is_deleted", "", "column is_deleted",
			"is NOT NULL; order.schema.softDelete.liveValue empty means NULL marks a live order, so no order would ever be closed",
			"set order.schema.softDelete.liveValue to the value of an order that is not deleted"},
		{"deleted_at", "0", "column deleted_at", "is DATETIME; order.schema.softDelete.liveValue 0 needs an integer type",
			"leave order.schema.softDelete.liveValue empty when NULL marks a live order (deleted_at), or name the flag column in order.schema.softDelete.column"},
		{"is_deleted", "no", "column is_deleted", "is TINYINT; order.schema.softDelete.liveValue 'no' needs a text type or ENUM",
			"leave order.schema.softDelete.liveValue empty when NULL marks a live order (deleted_at), or name the flag column in order.schema.softDelete.column"},
		{"row_state", "alive", "column row_state",
			"is an ENUM of live, gone, without 'alive' (order.schema.softDelete.liveValue): no row can hold it",
			"set order.schema.softDelete.liveValue to members of the ENUM"},
	} {
		probs := problemsOf(t, b, with(c.col, c.live))
		require.Len(t, probs, 1, "%s = %q: %v", c.col, c.live, probs)
		p := probs["order_info "+c.object]
		require.Equal(t, c.detail, p.Detail, "%s = %q", c.col, c.live)
		require.Equal(t, c.fix, p.Fix, "%s = %q", c.col, c.live)
	}
}

// With coupon.anyCopy the close gives back a coupon's copies by coupon.id:
// the check wants that column, and a unique key over it.
func TestCheckWantsTheCouponCopiesID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	s := foreignSchema(t)
	s.Coupon.AnyCopy, s.Coupon.ID = true, "id"
	require.NoError(t, b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx))

	s.Coupon.ID = "member_id"
	probs := problemsOf(t, b, s)
	require.Len(t, probs, 1, "%v", probs)
	uk := probs["coupon_history unique key over member_id"]
	require.Equal(t, "CREATE UNIQUE INDEX `uk_member_id` ON `coupon_history` (`member_id`) ALGORITHM=INPLACE LOCK=NONE", uk.Fix)
	require.Contains(t, uk.String(), "(order.schema.coupon.id): the close gives back each copy of a coupon by its id")

	s.Coupon.ID = "copy_id"
	err := b.migrator(t, migrations.Config{Shop: s}).Check(b.ctx)
	require.ErrorContains(t, err, "column coupon_history.copy_id is missing")
}
