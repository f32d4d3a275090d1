package inspect_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/schema"
)

// A View in an order source's tables finds an order in whichever
// of them holds it, with its lines from the item table of the same
// suffix, and says which table that was.
func TestViewInTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	for _, stmt := range []string{
		`CREATE TABLE order_info_1 LIKE order_info`,
		`CREATE TABLE order_item_1 LIKE order_item`,
		`INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes) VALUES ('T0-1', 3, 0, NOW(), 30)`,
		`INSERT INTO order_info_1 (order_no, user_id, status, create_time, timeout_minutes) VALUES ('T1-1', 4, 2, NOW(), 30)`,
		`INSERT INTO order_item_1 (order_no, sku_id, quantity) VALUES ('T1-1', 5, 2), ('T1-1', 6, 1)`,
		`INSERT INTO order_item (order_no, sku_id, quantity) VALUES ('T1-1', 99, 9)`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	home := inspect.New(db.DB, orders.CompensateOutbox)
	require.Equal(t, []string{"order_info"}, home.Tables())
	_, err := home.Order(ctx, "T1-1")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)

	in, err := home.InTables(schema.Default(), []string{"order_info", "order_info_1"})
	require.NoError(t, err)
	d, err := in.Order(ctx, "T1-1")
	require.NoError(t, err)
	require.Equal(t, "order_info_1", d.Table)
	require.EqualValues(t, 4, d.Order.UserID)
	require.Len(t, d.Items, 2)
	require.EqualValues(t, 5, d.Items[0].SKUID)

	d, err = in.Order(ctx, "T0-1")
	require.NoError(t, err)
	require.Equal(t, "order_info", d.Table)

	d, err = in.OrderIn(ctx, "T1-1", "order_info_1")
	require.NoError(t, err)
	require.Equal(t, "order_info_1", d.Table, "in the table a dead letter names")
	d, err = in.OrderIn(ctx, "T0-1", "order_info_1")
	require.NoError(t, err)
	require.Equal(t, "order_info", d.Table, "not there: in the others")

	_, err = in.Order(ctx, "NOSUCH")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)
	require.ErrorContains(t, err, "order NOSUCH in 2 order tables (order_info ... order_info_1)")

	_, err = home.InTables(schema.Default(), []string{"t_order_1"})
	require.ErrorContains(t, err, "does not start with the order table's name order_info")
}

// A View in a declared schema's tables (order.schema.table) reads each by
// the schema's names: the order by its order number column, its lines
// from the item table of the same suffix, its status as stored.
func TestViewInDeclaredTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	for _, stmt := range []string{
		`CREATE TABLE t_order_1 LIKE t_order`,
		`CREATE TABLE t_order_item_1 LIKE t_order_item`,
		`INSERT INTO t_order_1 (id, order_sn, member_id, order_status, created_at) VALUES (70, 'S1-1', 4, 4, NOW())`,
		`INSERT INTO t_order_item_1 (order_id, goods_sku, num) VALUES (70, 5, 2)`,
		`INSERT INTO t_order_item (order_id, goods_sku, num) VALUES (70, 99, 9)`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	in, err := inspect.New(db.DB, orders.CompensateLocal).InTables(sch, []string{"t_order", "t_order_1"})
	require.NoError(t, err)
	d, err := in.Order(ctx, "S1-1")
	require.NoError(t, err)
	require.Equal(t, "t_order_1", d.Table)
	require.Equal(t, "S1-1", d.OrderNo)
	require.NotNil(t, d.Shop)
	require.Equal(t, "closed", d.Shop.StatusName())
	require.Equal(t, "4", d.Shop.Row.User.String)
	require.Equal(t, []inspect.ShopItem{{SKU: "5", Quantity: "2"}}, d.Shop.Items)
	require.Empty(t, d.Shop.Stock, "no t_sku_stock row for SKU 5")
	require.Empty(t, d.Items)

	_, err = in.Order(ctx, "NOSUCH")
	require.ErrorIs(t, err, orders.ErrOrderNotFound)
}
