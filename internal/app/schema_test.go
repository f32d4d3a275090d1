package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
)

// TestDeclaredSchemaTakesEffect: order.schema reaches the closer serve and
// run build (Open), which closes the shop's own orders with every
// giveback, and the lifecycle jobs, which cannot work on it, are not built
// and say why.
func TestDeclaredSchemaTakesEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-1", MemberID: 3, Age: time.Hour, Coupon: 9, Points: 40,
		Items: []ordertest.Item{{SKU: 5, Qty: 2}}})
	base, err := ordertest.SnapshotForeign(ctx, db)
	require.NoError(t, err)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:"}
	cfg, err := config.LoadWith([]byte(ordertest.ForeignYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)

	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	st, err := d.closer.Run(ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, st.String())
	require.Equal(t, 4, db.Count(t, `SELECT order_status FROM t_order WHERE order_sn = 'SN-1'`))
	require.Equal(t, 1000, db.Count(t, `SELECT points FROM t_member WHERE id = 3`))
	require.NoError(t, ordertest.CheckForeign(ctx, db, base, ordertest.LockedOnly))

	require.Nil(t, d.lifecycle)
	require.ErrorIs(t, d.HandlerDeps().NoLifecycle, errLifecycleDeclared)

	// Outbox compensation cannot carry the matched coupon or the points:
	// Open refuses rather than closing orders without them.
	cfg.Order.Compensation = config.OrderCompensation{Mode: "outbox", InventoryURL: "http://inv.local/r", CouponURL: "http://cpn.local/r"}
	_, err = Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.ErrorContains(t, err, "orders: outbox compensation cannot give back a coupon found by matching columns")
}

// TestDeclaredShardedHomeIsChecked: with the declared shop's orders split
// into t_order_0 ... and mysql.dsn on an order source's database, as
// sharded-orders.md advises, migrate and the start-up check look at that
// source's first order table in mysql.dsn's database, not at a table
// named order.schema.table, which a sharded shop does not have.
func TestDeclaredShardedHomeIsChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	_, err := db.ExecContext(ctx, `RENAME TABLE t_order TO t_order_0, t_order_item TO t_order_item_0`)
	require.NoError(t, err)
	env := map[string]string{"MYSQL_DSN": db.DSN,
		"ORDER_SOURCES": `[{name: s0, dsn: "` + db.DSN + `", tables: "t_order_0"}]`}
	cfg, err := config.LoadWith([]byte(ordertest.ForeignYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)

	mcfg, err := MigrationsConfig(cfg)
	require.NoError(t, err)
	require.Equal(t, []string{"t_order_0"}, mcfg.OrderTables)
	require.NoError(t, checkDatabase(ctx, cfg, db.DB, slog.New(slog.DiscardHandler)))

	// A list naming no table of the database: the fix is in that list.
	env["ORDER_SOURCES"] = `[{name: s0, dsn: "` + db.DSN + `", tables: "t_orders_{0..1}"}]`
	cfg, err = config.LoadWith([]byte(ordertest.ForeignYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	err = checkDatabase(ctx, cfg, db.DB, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "table t_orders_0 is missing; fix: create it, or correct the order tables order.sources lists")
	require.ErrorContains(t, err, "table t_order_items_0 is missing; fix: create it, or correct the order tables order.sources lists")
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	err = checkSource(ctx, cfg, srcs[0], db.DB, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "table t_orders_1 is missing; fix: create it, or correct the order tables order.sources lists",
		"not CREATE TABLE t_orders_1 LIKE t_orders_0, which is missing too")

	// mysql.dsn on no source's database holds order.schema.table itself.
	env["ORDER_SOURCES"] = `[{name: s0, dsn: "` + db.DSN + `&timeout=3s", tables: "t_order_0"}]`
	cfg, err = config.LoadWith([]byte(ordertest.ForeignYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	require.ErrorContains(t, checkDatabase(ctx, cfg, db.DB, slog.New(slog.DiscardHandler)), "table t_order is missing")
}

// TestDeclaredDateTimeSchemaRefusesADSTZone: the start-up check spares a
// session zone with daylight saving only an epoch order.schema.timeUnit;
// a declared shop of DATETIME columns (the default unit) is refused as the
// executor's own schema is, naming the setting that accepts the risk.
func TestDeclaredDateTimeSchemaRefusesADSTZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := mariadbtest.Start(t, mariadbtest.Options{Env: []string{"TZ=Europe/Berlin"}})
	db, dsn := srv.NewDB(t, "shop")
	ordertest.ForeignTables(t, db)
	env := map[string]string{"MYSQL_DSN": dsn}
	cfg, err := config.LoadWith([]byte(ordertest.ForeignYAML), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	err = checkDatabase(ctx, cfg, db, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "mysql: the session time zone observes daylight saving (time_zone=SYSTEM (CET)")
	require.ErrorContains(t, err, "mysql.allowDSTZone")
	require.ErrorContains(t, err, "t_order.created_at is compared with NOW()", "the shop's own column is named")
}
