package orders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/schema"
)

// Each constructor refuses bad settings with a message naming the setting
// and its value.
func TestConstructorRefusals(t *testing.T) {
	t.Parallel()
	db, locker := paytest.Unconnected(t)
	closer := func(cfg orders.CloserConfig) error { _, err := orders.NewCloser(db, locker, cfg); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"closer: no database", func() error { _, err := orders.NewCloser(nil, locker, orders.CloserConfig{}); return err }(), "orders: NewCloser needs a database and a locker"},
		{"closer: reason", closer(orders.CloserConfig{Reason: "a reason that is far longer than thirty-two characters"}), "orders: close reason \"a reason that is far longer than thirty-two characters\" is longer than 32 characters"},
		{"closer: page size", closer(orders.CloserConfig{PageSize: 5001}), "orders: page size 5001 out of [1, 5000]"},
		{"closer: run retention", closer(orders.CloserConfig{RunRetention: time.Minute}), "orders: run retention 1m0s is below 1h"},
		{"closer: trade fan-out", closer(orders.CloserConfig{TradeFanOut: -1}), "orders: trade fan-out -1 out of [1, 256]"},
		{"closer: compensation", closer(orders.CloserConfig{Compensation: 7}), "orders: unknown compensation mode 7"},
		{"closer: outbox, matched coupon", closer(orders.CloserConfig{Compensation: orders.CompensateOutbox, Schema: noExtra(ordertest.ForeignSchema(ordertest.LockedOnly))}),
			"orders: outbox compensation cannot give back a coupon found by matching columns (order.schema.coupon.match): its event names a coupon id; use local compensation, or a coupon id on the order"},
		{"closer: outbox, givebacks", closer(orders.CloserConfig{Compensation: orders.CompensateOutbox, Schema: noCoupon(ordertest.ForeignSchema(ordertest.LockedOnly))}),
			"orders: outbox compensation has no event for the givebacks [t_member.points += use_points by t_member.id = member_id] (order.schema.givebacks); use local compensation"},
		{"closer: schema", closer(orders.CloserConfig{Schema: badTable(ordertest.ForeignSchema(ordertest.LockedOnly))}),
			"orders: order schema: table: \"t order\" is not a plain table or column name (letters, digits, '_', '$'; at most 64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
	require.NoError(t, closer(orders.CloserConfig{}), "the defaults are valid")
	require.NoError(t, closer(orders.CloserConfig{Schema: ordertest.ForeignSchema(ordertest.LockedOnly)}), "a declared schema is valid")
	require.NoError(t, closer(orders.CloserConfig{Compensation: orders.CompensateOutbox,
		Schema: noCoupon(noExtra(ordertest.ForeignSchema(ordertest.TakenAtPlacement)))}), "outbox mode carries stock by SKU")
}

// noExtra is s without its per-order givebacks.
func noExtra(s schema.Schema) schema.Schema { s.Extra = nil; return s }

// noCoupon is s without its coupon.
func noCoupon(s schema.Schema) schema.Schema { s.Coupon = nil; return s }

// badTable is s with an order table name no statement may carry.
func badTable(s schema.Schema) schema.Schema { s.Orders.Table = "t order"; return s }
