package inspect_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderstatus"
	"github.com/orderjob/executor/orders/schema"
)

// flagState is what the console shows of a flag's order, and the table
// the flag names.
type flagState struct {
	Table   string
	Status  int
	Shipped bool
}

// The flags of an order source's tables show each order's state from the
// table its flag was written from: order_info_0 and order_info_1 both hold
// an order of id 7, each flagged by orderFulfillmentTimeoutJob on its own
// table, and only order_info_1's shipped since; order_info's order 7,
// completed, is neither. A flag written before migration 0139 (no table)
// reads order_info as the list always did; one naming a table the View
// does not read shows no state.
func TestFlagsReadTheirOrdersTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	for _, stmt := range []string{
		`CREATE TABLE order_info_0 LIKE order_info`,
		`CREATE TABLE order_item_0 LIKE order_item`,
		`CREATE TABLE order_info_1 LIKE order_info`,
		`CREATE TABLE order_item_1 LIKE order_item`,
		`CREATE TABLE order_info_2 LIKE order_info`,
		`INSERT INTO order_info (id, order_no, user_id, status, create_time, pay_time, ship_time, complete_time)
			VALUES (7, 'H-7', 3, 4, NOW() - INTERVAL 30 DAY, NOW() - INTERVAL 30 DAY, NOW() - INTERVAL 29 DAY, NOW() - INTERVAL 10 DAY)`,
		`INSERT INTO order_info_0 (id, order_no, user_id, status, create_time, pay_time) VALUES (7, 'A-7', 1, 1, NOW() - INTERVAL 9 DAY, NOW() - INTERVAL 9 DAY)`,
		`INSERT INTO order_info_1 (id, order_no, user_id, status, create_time, pay_time) VALUES (7, 'B-7', 2, 1, NOW() - INTERVAL 9 DAY, NOW() - INTERVAL 9 DAY)`,
		`INSERT INTO order_info_2 (id, order_no, user_id, status, create_time, pay_time) VALUES (8, 'X-8', 4, 1, NOW() - INTERVAL 9 DAY, NOW() - INTERVAL 9 DAY)`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	for _, table := range []string{"order_info_0", "order_info_1"} {
		l, err := lifecycle.New(db.DB, lifecycle.Config{Table: table})
		require.NoError(t, err)
		st, err := l.FlagOverdue(ctx, lifecycle.Options{})
		require.NoError(t, err)
		require.Equal(t, 1, st.Changed, table)
	}
	for _, stmt := range []string{
		`UPDATE order_info_1 SET status = 3, ship_time = NOW(3) WHERE id = 7`,
		`INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
			VALUES (7, 'H-7', 3, NOW() - INTERVAL 30 DAY, NOW() - INTERVAL 23 DAY, NOW() - INTERVAL 23 DAY)`,
		`INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at, order_table)
			VALUES (8, 'X-8', 4, NOW() - INTERVAL 9 DAY, NOW() - INTERVAL 2 DAY, NOW(3), 'order_info_2')`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	in, err := inspect.New(db.DB, orders.CompensateLocal).InTables(schema.Default(), []string{"order_info_0", "order_info_1"})
	require.NoError(t, err)

	states := func(q inspect.FlagQuery) map[string]flagState {
		t.Helper()
		p, err := in.FulfilmentFlags(ctx, q)
		require.NoError(t, err)
		out := map[string]flagState{}
		for _, f := range p.Flags {
			out[f.OrderNo] = flagState{f.OrderTable, f.OrderStatus, f.ShipTime.Valid}
		}
		return out
	}
	require.Equal(t, map[string]flagState{
		"A-7": {"order_info_0", orderstatus.Paid, false},
		"B-7": {"order_info_1", orderstatus.Shipped, true},
		"H-7": {"", orderstatus.Completed, true},
		"X-8": {"order_info_2", -1, false},
	}, states(inspect.FlagQuery{}))
	require.Equal(t, map[string]flagState{"A-7": {"order_info_0", orderstatus.Paid, false}}, states(inspect.FlagQuery{Open: true}),
		"only A-7 is still unshipped")

	for no, want := range map[string]flagState{"A-7": {"order_info_0", orderstatus.Paid, false}, "B-7": {"order_info_1", orderstatus.Shipped, true}} {
		d, err := in.Order(ctx, no)
		require.NoError(t, err)
		require.NotNil(t, d.Fulfilment, no)
		require.Equal(t, want, flagState{d.Fulfilment.OrderTable, d.Fulfilment.OrderStatus, d.Fulfilment.ShipTime.Valid}, no)
	}
}
