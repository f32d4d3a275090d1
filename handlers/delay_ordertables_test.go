package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/schema"
)

// tableCloses is a batch close per order table of b's database (order_info
// and the tables given), for OrderCloseTables.Close.
func tableCloses(t *testing.T, b *testBundle, tables ...string) map[string]delay.BatchHandlerFunc {
	t.Helper()
	locker, err := orderlock.New(orderlock.Config{Client: b.rdb, Prefix: b.prefix})
	require.NoError(t, err)
	out := map[string]delay.BatchHandlerFunc{}
	for _, table := range tables {
		sch, err := schema.Default().ForTable(table)
		require.NoError(t, err)
		c, err := orders.NewCloser(b.db.DB, locker, orders.CloserConfig{Schema: sch})
		require.NoError(t, err)
		out[table] = DelayOrderCloseBatch(c.CloseOrders)
	}
	return out
}

// A database holding several order tables: each orderTimeoutClose task
// closes its order in the table its payload names, one without a table
// in the default table; a task naming a table the database does not hold
// is refused at registration and, written around the check, FAILS.
func TestDelayOrderCloseTablesClosesInTheTaskTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	placed := map[string]int64{}
	for _, no := range []string{"TT-1", "TT-2", "TT-3", "TT-4"} {
		placed[no] = ordertest.Order(t, b.db.DB, ordertest.OrderOpts{OrderNo: no, Age: time.Hour,
			Items: []ordertest.Item{{SKU: 1, Qty: 1}}}).ID
	}
	_, err := orderdemo.SplitTables(ctx, b.db.DB, 2) // id % 2: order_info_0, order_info_1
	require.NoError(t, err)
	ordertest.Order(t, b.db.DB, ordertest.OrderOpts{OrderNo: "TT-DEF", Age: time.Hour, Items: []ordertest.Item{{SKU: 2, Qty: 1}}})
	ot := OrderCloseTables{Default: "order_info", Close: tableCloses(t, b, "order_info", "order_info_0", "order_info_1")}

	cfg := b.fastConfig(nil)
	cfg.BatchHandlers = map[string]delay.BatchHandlerFunc{delay.OrderTimeoutCloseHandler: DelayOrderCloseTables(ot)}
	cfg.PayloadValidators = map[string]delay.PayloadValidator{delay.OrderTimeoutCloseHandler: ot.Validate}
	d := newDispatcher(t, cfg)
	tableOf := func(no string) string { return fmt.Sprintf("order_info_%d", placed[no]%2) }
	due := time.Now().Add(-time.Second)
	for no := range placed {
		_, _, err := d.Client().Register(ctx, delay.OrderTimeoutCloseIn(tableOf(no), no, due))
		require.NoError(t, err)
	}
	_, _, err = d.Client().Register(ctx, delay.OrderTimeoutClose("TT-DEF", due))
	require.NoError(t, err)
	_, _, err = d.Client().Register(ctx, delay.OrderTimeoutCloseIn("t_order_9", "TT-X", due))
	require.EqualError(t, err, "delay: payload.table: t_order_9 is not an order table of this database (its order tables: order_info, order_info_0, order_info_1)")
	// One registered around the check (a client that does not know the
	// tables).
	unchecked, err := delay.NewClient(b.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	tx, _, err := unchecked.Register(ctx, delay.OrderTimeoutCloseIn("t_order_9", "TT-X", due))
	require.NoError(t, err)
	require.NoError(t, d.Client().Schedule(ctx, tx))
	start(t, d)

	for no := range placed {
		b.waitStatus(t, "order-timeout-"+no, delay.StatusDone)
		var status int
		require.NoError(t, b.db.Get(&status, `SELECT status FROM `+tableOf(no)+` WHERE order_no = ?`, no))
		require.Equal(t, 2, status, "%s closed in %s", no, tableOf(no))
	}
	b.waitStatus(t, "order-timeout-TT-DEF", delay.StatusDone)
	require.Equal(t, 1, b.db.Count(t, `SELECT COUNT(*) FROM order_info WHERE order_no = 'TT-DEF' AND status = 2`))
	tk := b.waitStatus(t, "order-timeout-TT-X", delay.StatusFailed)
	require.Contains(t, tk.LastError, "t_order_9 is not an order table of this database")
	require.Equal(t, 5, b.db.Count(t, `SELECT COUNT(*) FROM order_close_log`))
}

// The validator of a database without the default table requires a
// table; payloads name it as a string.
func TestOrderCloseTablesValidate(t *testing.T) {
	t.Parallel()
	ot := OrderCloseTables{Default: "t_order", Close: map[string]delay.BatchHandlerFunc{"t_order_1": nil, "t_order_2": nil}}
	for _, tc := range []struct{ payload, err string }{
		{`{"orderNo": "1", "table": "t_order_2"}`, ""},
		{`{"orderNo": "1"}`, "delay: payload.table: is required: this database has no order table t_order, the default (its order tables: t_order_1, t_order_2)"},
		{`{"orderNo": "1", "table": 7}`, "delay: payload.table: must be a string, not 7"},
		{`{"orderNo": "1", "table": ""}`, "delay: payload.table: is empty"},
		{`{"table": "t_order_1"}`, "delay: payload.orderNo: is required (the order to close)"},
	} {
		err := ot.Validate(json.RawMessage(tc.payload))
		if tc.err == "" {
			require.NoError(t, err, tc.payload)
			continue
		}
		require.EqualError(t, err, tc.err, tc.payload)
	}
	p, err := json.Marshal(delay.OrderTimeoutClose("1", time.Now()).Payload)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderNo": "1"}`, string(p), "a task without a table is written as before")
}
