package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders/schema"
)

// shopConsole serves a console over a database holding the foreign shop's
// tables (ordertest.ForeignTables), declared as sch, and signs in.
func shopConsole(t *testing.T, sch schema.Schema, fill func(db *dbtest.DB)) *browser {
	t.Helper()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	fill(db)
	srv := New(Config{Token: "api-token"})
	require.NoError(t, srv.MountConsole(ConsoleConfig{Operators: []Operator{{"alice", aliceToken}}, Session: time.Hour,
		DB: db.DB, Schema: sch}))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	w := &consoleWorld{srv: hs}
	b := w.browser(t)
	require.Equal(t, http.StatusOK, b.signIn(aliceToken).status)
	return b
}

// The order view of a declared shop schema (order.schema.table) looks the
// order up by the shop's order number in its own table and shows what the
// schema names: the row by the shop's column names, the status by its
// unpaid and closed values, the lines of its item table, the stock rows of
// its stock table and its coupon; what the schema does not name (a close
// reason, fulfilment) is left out.
func TestConsoleOrderOfDeclaredSchema(t *testing.T) {
	t.Parallel()
	b := shopConsole(t, ordertest.ForeignSchema(ordertest.LockedOnly), func(db *dbtest.DB) {
		ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-1", MemberID: 42, Age: time.Hour, Coupon: 3,
			Items: []ordertest.Item{{SKU: 5, Qty: 2}, {SKU: 6, Qty: 1}}})
		ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-2", Status: ordertest.ForeignPaid,
			Items: []ordertest.Item{{SKU: 5, Qty: 1}}})
		_, err := db.Exec(`UPDATE t_order SET order_status = 4, cancel_time = NOW(3) WHERE order_sn = 'SN-2'`)
		require.NoError(t, err)
	})
	p := b.get("/console/orders/SN-1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	for _, want := range []string{"<h1>Order SN-1</h1>", "Found in the order table t_order.", "<dt>User</dt><dd>42</dd>",
		"<dt>Status</dt><dd>unpaid (0)</dd>", "<dt>Payment timeout</dt><dd>15 min", "<th>Stock locked</th>",
		`<tr><td>5</td><td class="num">2</td><td class="num">2</td></tr>`,
		`<tr><td>6</td><td class="num">1</td><td class="num">1</td></tr>`,
		"<h2>Coupon</h2>", "<dt>State</dt><dd>used (1)</dd>", "<dt>Closed</dt><dd>—</dd>"} {
		require.Contains(t, p.body, want)
	}
	for _, absent := range []string{"Amount", "Shipped", "Close reason", "Line", "Fulfilment flag", "Soft delete"} {
		require.NotContains(t, p.body, absent)
	}
	p = b.get("/console/orders/SN-2")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<dt>Status</dt><dd>closed (4)</dd>")
	require.Contains(t, p.body, "The order uses no coupon.")
	require.NotContains(t, p.body, "<dt>Closed</dt><dd>—</dd>", "SN-2's cancel time")

	p = b.get("/console/orders/NOPE")
	require.Equal(t, http.StatusNotFound, p.status, p.body)
	require.Contains(t, p.body, "order NOPE")
	p = b.get("/console/orders")
	require.Contains(t, p.body, "the order table t_order")
}

// A shop that soft-deletes orders (order.schema.softDelete): the order
// view shows the column's value and whether the close takes the order as
// live or deleted, by the live value the schema declares (a NULL
// deleted_at is live, a NULL flag whose live value is 0 is not), and says
// of a deleted unpaid order that the close never closes it.
func TestConsoleOrderOfSoftDeleteSchema(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, column string
		decl         schema.SoftDelete
		live, del    string // the SET clauses of a live and a deleted order
		want         [3]string
	}{
		{"is_deleted", "is_deleted TINYINT NULL DEFAULT 0", schema.SoftDelete{Column: "is_deleted", Live: schema.Int(0)},
			"is_deleted = 0", "is_deleted = 1",
			[3]string{"live (is_deleted = 0)", "deleted (is_deleted = 1): the close never closes it", "deleted (is_deleted is NULL): the close never closes it"}},
		{"deleted_at", "deleted_at DATETIME NULL", schema.SoftDelete{Column: "deleted_at"},
			"deleted_at = NULL", "deleted_at = '2026-12-01 10:00:00'",
			[3]string{"live (deleted_at is NULL)", "deleted (deleted_at = 2026-12-01 10:00:00): the close never closes it", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sch := ordertest.ForeignSchema(ordertest.LockedOnly)
			sch.Orders.SoftDelete = c.decl
			b := shopConsole(t, sch, func(db *dbtest.DB) {
				for _, sn := range []string{"SN-L", "SN-D", "SN-N", "SN-C"} {
					ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: sn, Age: time.Hour, Items: []ordertest.Item{{SKU: 5, Qty: 1}}})
				}
				for _, q := range []string{"ALTER TABLE t_order ADD COLUMN " + c.column,
					"UPDATE t_order SET " + c.live + " WHERE order_sn = 'SN-L'",
					"UPDATE t_order SET " + c.del + " WHERE order_sn IN ('SN-D', 'SN-C')",
					"UPDATE t_order SET " + c.decl.Column + " = NULL WHERE order_sn = 'SN-N'",
					"UPDATE t_order SET order_status = 4 WHERE order_sn = 'SN-C'"} {
					_, err := db.Exec(q)
					require.NoError(t, err, q)
				}
			})
			for i, sn := range []string{"SN-L", "SN-D", "SN-N"} {
				if c.want[i] == "" {
					continue
				}
				p := b.get("/console/orders/" + sn)
				require.Equal(t, http.StatusOK, p.status, p.body)
				require.Contains(t, p.body, "<dt>Status</dt><dd>unpaid (0)</dd>\n  <dt>Soft delete</dt><dd>"+c.want[i]+"</dd>", sn)
			}
			p := b.get("/console/orders/SN-C")
			require.Equal(t, http.StatusOK, p.status, p.body)
			require.Contains(t, p.body, "<dt>Soft delete</dt><dd>deleted (", "a closed order deleted since")
			require.NotContains(t, p.body, "never closes it", "SN-C is closed already")
		})
	}
}

// A shop's coupon kept by id shows its row by the schema's id and text
// states; an order status the schema does not name shows as it is.
func TestConsoleOrderOfDeclaredSchemaCouponByID(t *testing.T) {
	t.Parallel()
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Coupon = ordertest.ForeignCouponByID()
	b := shopConsole(t, sch, func(db *dbtest.DB) {
		ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-3", UserCoupon: true, Items: []ordertest.Item{{SKU: 7, Qty: 1}}})
		_, err := db.Exec(`UPDATE t_order SET order_status = 1 WHERE order_sn = 'SN-3'`)
		require.NoError(t, err)
	})
	p := b.get("/console/orders/SN-3")
	require.Equal(t, http.StatusOK, p.status, p.body)
	for _, want := range []string{"<dt>Status</dt><dd>1</dd>", "<dt>Coupon</dt><dd>1</dd>", "<dt>State</dt><dd>used (USED)</dd>"} {
		require.Contains(t, p.body, want)
	}
}

// On a declared shop schema the fulfilment flags' page says why it stays
// empty: the job that writes flags does not run there.
func TestConsoleFlagsOfDeclaredSchemaSayWhyEmpty(t *testing.T) {
	t.Parallel()
	b := shopConsole(t, ordertest.ForeignSchema(ordertest.LockedOnly), func(*dbtest.DB) {})
	p := b.get("/console/fulfilment?open=true")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "orderFulfillmentTimeoutJob does not run on a declared shop schema (<code>order.schema.table</code>)")
	require.Contains(t, p.body, "No flag matches.")
}

// An order table keeping epoch times (order.schema.timeUnit) shows them
// as the instants they are, in UTC, and says so.
func TestConsoleOrderOfEpochSchemaShowsUTC(t *testing.T) {
	t.Parallel()
	sch := ordertest.ForeignSchema(ordertest.LockedOnly)
	sch.Orders.TimeUnit, sch.Orders.CreateTime, sch.Orders.CloseTime, sch.Orders.UpdateTime = schema.EpochMillis, "created_ms", "cancel_ms", ""
	b := shopConsole(t, sch, func(db *dbtest.DB) {
		ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: "SN-E", Items: []ordertest.Item{{SKU: 5, Qty: 1}}})
		_, err := db.Exec(`ALTER TABLE t_order ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0, ADD COLUMN cancel_ms BIGINT NULL`)
		require.NoError(t, err)
		// 2026-03-29 00:59:59.250 UTC, and closed at 01:00:00.5 UTC.
		_, err = db.Exec(`UPDATE t_order SET created_ms = 1774745999250, cancel_ms = 1774746000500 WHERE order_sn = 'SN-E'`)
		require.NoError(t, err)
	})
	p := b.get("/console/orders/SN-E")
	require.Equal(t, http.StatusOK, p.status, p.body)
	for _, want := range []string{"<dt>Created</dt><dd>2026-03-29 00:59:59.250 UTC</dd>", "due 2026-03-29 01:14:59.250 UTC",
		"<dt>Closed</dt><dd>2026-03-29 01:00:00.500 UTC</dd>"} {
		require.Contains(t, p.body, want)
	}
}
