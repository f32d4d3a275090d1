package closesql

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/schema"
)

// The order view reads a declared schema's tables by the names it gives
// them, quoted as the close's statements quote them; a column the schema
// does not name comes back NULL, and a schema without stock or coupon
// tables has no statement for them.
func TestViewRendersDeclaredNames(t *testing.T) {
	t.Parallel()
	s := schema.Schema{Declared: true,
		Orders: schema.Orders{Table: "order", ScanIndex: "idx_st", ID: "id", OrderNo: "sn", Status: "state",
			CreateTime: "created", Unpaid: schema.Int(0), Closed: schema.Int(9), TimeoutMinutes: 15, CloseTime: "cancelled"},
		Items: schema.Items{Table: "line", Index: "idx_sn", OrderColumn: "sn", SKU: "goods", Quantity: "num"}}
	v, err := RenderView(s)
	require.NoError(t, err)
	require.Equal(t, "\nSELECT `id` AS id, `sn` AS order_no, NULL AS user_id, CAST(`state` AS CHAR) AS status, `created` AS create_time, "+
		"15 AS timeout_minutes, `cancelled` AS close_time, NULL AS close_reason, NULL AS update_time, NULL AS coupon_id\n"+
		"FROM `order` WHERE `sn` = ?", v.Order)
	require.Equal(t, "SELECT `goods` AS sku_id, `num` AS quantity FROM `line` FORCE INDEX (`idx_sn`) WHERE `sn` = ? ORDER BY `goods`", v.Items)
	require.Empty(t, v.Stock)
	require.Empty(t, v.Coupon)

	// A soft delete adds its column as text and whether the row is live,
	// by the close's condition; NULL live tests IS NULL.
	live, err := schema.ParseValue("'0'")
	require.NoError(t, err)
	s.Orders.SoftDelete = schema.SoftDelete{Column: "del_flag", Live: live}
	v, err = RenderView(s)
	require.NoError(t, err)
	require.Contains(t, v.Order, "NULL AS coupon_id, CAST(`del_flag` AS CHAR) AS soft_delete, IF(`del_flag` = '0', 1, 0) AS soft_delete_live\nFROM `order`")
	s.Orders.SoftDelete = schema.SoftDelete{Column: "deleted_at"}
	v, err = RenderView(s)
	require.NoError(t, err)
	require.Contains(t, v.Order, "CAST(`deleted_at` AS CHAR) AS soft_delete, IF(`deleted_at` IS NULL, 1, 0) AS soft_delete_live\n")

	s.Orders.Table = "bad name"
	_, err = RenderView(s)
	require.ErrorContains(t, err, "not a plain table or column name")
}
