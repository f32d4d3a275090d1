package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/schema"
)

// foreignShopTables are the tables of ours the foreign shop's database
// does not have: it keeps its orders, lines, stock and coupons in its own
// (ordertest's foreign shop), beside the executor's own tables.
var foreignShopTables = []string{"order_info", "order_item", "inventory", "user_coupon"}

// foreignRows closes the comparison's orders twice, one executor each:
// a fresh copy in our schema, then the same orders kept in a foreign
// schema (order_sn, status 0/4, a fixed timeout, lines by the order's
// id, a locked-only stock, a coupon-history row matched by member and
// coupon, points) closed with that schema declared; both Closers are
// built alike, only the schema differs.
func (b *closeBench) foreignRows(ctx context.Context) error {
	fmt.Fprintf(b.out, "declared foreign schema: the same %d orders in a shop's own tables, beside ours, one executor each\n", b.f.orders)
	b.header()
	db, name, err := b.dbs.cloneDB(ctx, b.tmplName, "ourschema")
	if err != nil {
		return err
	}
	r, err := b.closeWith(ctx, db, schema.Default(), "our schema, same data", ourTable(db, "order_info"))
	if err != nil {
		return err
	}
	r.check = b.check(ctx, db, b.base, true)
	b.emit(r)
	b.summary["ourschema"] = r.rate()
	if err := b.dbs.drop(ctx, name); err != nil {
		return err
	}

	db, name, err = b.foreignDB(ctx)
	if err != nil {
		return err
	}
	base, err := ordertest.SnapshotForeign(ctx, db)
	if err != nil {
		return err
	}
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Orders.TimeoutMinutes = b.spec(0).TimeoutMinutes // the data's: the same orders are due
	if r, err = b.closeWith(ctx, db, sch, "declared foreign schema", foreignTable(db, sch.Orders.TimeoutMinutes)); err != nil {
		return err
	}
	r.check = b.verdict(ordertest.CheckForeign(ctx, db, base, ordertest.LockedOnly), true)
	b.emit(r)
	b.foreignRate = r.rate()
	return b.dbs.drop(ctx, name)
}

// foreignTable is drainedTable of the foreign shop's order table.
func foreignTable(db *sqlx.DB, timeoutMinutes int) drainedTable {
	return drainedTable{db: db,
		closed: fmt.Sprintf("SELECT COUNT(*) FROM t_order WHERE order_status = %d", ordertest.ForeignCancelled),
		unpaid: fmt.Sprintf("SELECT COUNT(*) FROM t_order WHERE order_status = %d AND created_at + INTERVAL %d MINUTE <= ?", ordertest.ForeignUnpaid, timeoutMinutes)}
}

// closeWith closes db's due orders with one Closer on sch and checks
// that every order due at its start was closed, each once (table).
func (b *closeBench) closeWith(ctx context.Context, db *sqlx.DB, sch schema.Schema, name string, table drainedTable) (row, error) {
	server, err := dbserver.DetectServer(ctx, db)
	if err != nil {
		return row{}, err
	}
	at, err := dbNow(ctx, db)
	if err != nil {
		return row{}, err
	}
	c, err := orders.NewCloser(db, b.locker, orders.CloserConfig{Schema: sch, PageSize: b.f.pageSize, Server: server})
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", name, err)
	}
	start := time.Now()
	st, err := c.Run(ctx, orders.RunOptions{})
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", name, err)
	}
	r := row{name: name, closed: st.Closed, elapsed: time.Since(start)}
	return r, b.drained(ctx, name, r.closed, b.due, at, []drainedTable{table})
}

// foreignDB makes the foreign shop's database: the executor's own tables
// and the shop's, filled from the comparison's orders on the server
// (status 0 unpaid, else paid; points on every other order).
//
// The lines are copied in their own id order, as a shop placing the
// orders would have written them. Without ORDER BY the join walks
// order_info by uk_order_no, whose text order ("DEMO1", "DEMO10",
// "DEMO100") is not the id order: the lines of one page of orders then lay
// scattered over the table, and at 1,000,000 orders, past a 128 MiB buffer
// pool, the foreign close measured 0.60 of ours for reading them from disk.
func (b *closeBench) foreignDB(ctx context.Context) (*sqlx.DB, string, error) {
	db, name, err := b.dbs.skeleton(ctx, b.tmplName, "foreign", foreignShopTables...)
	if err != nil {
		return nil, "", err
	}
	if err := ordertest.CreateForeignTables(ctx, db); err != nil {
		return nil, "", err
	}
	from := b.tmplName
	err = b.dbs.execAll(ctx, "fill the foreign shop",
		fmt.Sprintf(`INSERT INTO `+"`%[2]s`"+`.t_order (id, order_sn, member_id, order_status, created_at, coupon_id, use_points)
			SELECT id, order_no, user_id, IF(status = 0, %[3]d, %[4]d), create_time, coupon_id, IF(id %% 2 = 0, 5, 0)
			FROM `+"`%[1]s`"+`.order_info`, from, name, ordertest.ForeignUnpaid, ordertest.ForeignPaid),
		fmt.Sprintf("INSERT INTO `%[2]s`.t_order_item (order_id, goods_sku, num) SELECT o.id, it.sku_id, it.quantity FROM `%[1]s`.order_item it JOIN `%[1]s`.order_info o ON o.order_no = it.order_no ORDER BY it.id", from, name),
		fmt.Sprintf("INSERT INTO `%[2]s`.t_sku_stock (sku, stock, locked) SELECT sku_id, available, locked FROM `%[1]s`.inventory", from, name),
		fmt.Sprintf("INSERT INTO `%[2]s`.t_goods (id, stock) SELECT sku_id, available FROM `%[1]s`.inventory", from, name),
		fmt.Sprintf("INSERT INTO `%[1]s`.t_coupon_history (member_id, coupon_id, use_status) SELECT member_id, coupon_id, 1 FROM `%[1]s`.t_order WHERE coupon_id IS NOT NULL", name),
		fmt.Sprintf("INSERT INTO `%[1]s`.t_member (id, points) SELECT DISTINCT member_id, 100000 FROM `%[1]s`.t_order", name),
		fmt.Sprintf("ANALYZE TABLE `%[1]s`.t_order, `%[1]s`.t_order_item, `%[1]s`.t_sku_stock, `%[1]s`.t_coupon_history, `%[1]s`.t_member", name),
	)
	return db, name, err
}
