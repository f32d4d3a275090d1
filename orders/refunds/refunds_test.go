package refunds_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
	"github.com/orderjob/executor/orders/refunds"
)

// The refunds view: what is owed (count, sum, oldest), the list, and a
// refund recorded once, with who recorded it.
func TestRefundsOwedView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	svc, err := payment.NewService(db.DB, locker, payment.ServiceConfig{})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)
	require.NoError(t, svc.AddStock(ctx, 1, 100))
	for _, no := range []string{"R-1", "R-2"} {
		_, err := svc.PlaceOrder(ctx, payment.NewOrder{OrderNo: no, UserID: 7, Items: []payment.Item{{SKUID: 1, Quantity: 1}}})
		require.NoError(t, err)
	}
	// R-1 is placed 31 minutes ago: past its 30 minutes' timeout.
	_, err = db.ExecContext(ctx, `UPDATE order_info SET pay_amount = 20.00,
		create_time = IF(order_no = 'R-1', create_time - INTERVAL 31 MINUTE, create_time)`)
	require.NoError(t, err)
	_, err = closer.CloseOrders(ctx, []string{"R-1"})
	require.NoError(t, err)
	for _, p := range []struct {
		no string
		n  payment.Notice
	}{
		{"R-2", payment.Notice{PaymentID: "wx-a", Amount: "20.00"}},  // pays R-2
		{"R-2", payment.Notice{PaymentID: "ali-b", Amount: "20.00"}}, // duplicate
		{"R-1", payment.Notice{PaymentID: "wx-c", Amount: "20.00"}},  // late
		{"R-1", payment.Notice{PaymentID: "unp-d", Amount: "19.50"}}, // late, another channel
	} {
		_, err := svc.PayWith(ctx, p.no, p.n)
		require.NoError(t, err)
	}
	r := refunds.New(db.DB)
	o, err := r.Owed(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, o.Count)
	require.Equal(t, "59.50", o.Amount)
	require.NotNil(t, o.Oldest)
	require.Equal(t, 3, o.Total)

	l, err := r.List(ctx, refunds.Filter{OrderNo: "R-1"})
	require.NoError(t, err)
	require.Len(t, l.Conflicts, 2)
	require.Equal(t, "unp-d", l.Conflicts[0].PaymentID, "newest first")

	p, err := r.MarkRefunded(ctx, "wx-c", "refund 9001", "alice")
	require.NoError(t, err)
	require.Equal(t, refunds.Done, p.RefundStatus)
	require.Equal(t, "refund 9001", p.RefundNote)
	require.NotNil(t, p.RefundedAt)
	require.Equal(t, "alice", p.RefundedBy)
	_, err = r.MarkRefunded(ctx, "wx-c", "again", "alice")
	require.ErrorIs(t, err, refunds.ErrDone)
	_, err = r.MarkRefunded(ctx, "nope", "", "alice")
	require.ErrorIs(t, err, refunds.ErrNotFound)
	_, err = r.MarkRefunded(ctx, "wx-a", "", "")
	var inv *oplist.InvalidInputError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "by", inv.Field)
	o, err = r.Owed(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, o.Count)
	require.Equal(t, "39.50", o.Amount)
	require.Equal(t, 3, o.Total)
}
