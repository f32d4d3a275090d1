package orders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
)

// The refunds view: what is owed (count, sum, oldest), the list, and a
// refund recorded once, with who recorded it.
func TestRefundsOwedView(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	for _, no := range []string{"R-1", "R-2"} {
		b.place(t, no, false, orders.Item{SKUID: 1, Quantity: 1})
	}
	_, err := b.db.ExecContext(b.ctx, `UPDATE order_info SET pay_amount = 20.00`)
	require.NoError(t, err)
	_, err = b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{}).CloseOrders(b.ctx, []string{"R-1"})
	require.NoError(t, err)
	for _, p := range []struct {
		no string
		n  orders.Notice
	}{
		{"R-2", orders.Notice{PaymentID: "wx-a", Amount: "20.00"}},  // pays R-2
		{"R-2", orders.Notice{PaymentID: "ali-b", Amount: "20.00"}}, // duplicate
		{"R-1", orders.Notice{PaymentID: "wx-c", Amount: "20.00"}},  // late
		{"R-1", orders.Notice{PaymentID: "unp-d", Amount: "19.50"}}, // late, another channel
	} {
		_, err := b.svc.PayWith(b.ctx, p.no, p.n)
		require.NoError(t, err)
	}
	r := orders.NewRefunds(b.db.DB)
	o, err := r.Owed(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, o.Count)
	require.Equal(t, "59.50", o.Amount)
	require.NotNil(t, o.Oldest)
	require.Equal(t, 3, o.Total)

	l, err := r.List(b.ctx, orders.RefundFilter{OrderNo: "R-1"})
	require.NoError(t, err)
	require.Len(t, l.Conflicts, 2)
	require.Equal(t, "unp-d", l.Conflicts[0].PaymentID, "newest first")

	p, err := r.MarkRefunded(b.ctx, "wx-c", "refund 9001", "alice")
	require.NoError(t, err)
	require.Equal(t, orders.RefundDone, p.RefundStatus)
	require.Equal(t, "refund 9001", p.RefundNote)
	require.NotNil(t, p.RefundedAt)
	require.Equal(t, "alice", p.RefundedBy)
	_, err = r.MarkRefunded(b.ctx, "wx-c", "again", "alice")
	require.ErrorIs(t, err, orders.ErrRefundDone)
	_, err = r.MarkRefunded(b.ctx, "nope", "", "alice")
	require.ErrorIs(t, err, orders.ErrRefundNotFound)
	_, err = r.MarkRefunded(b.ctx, "wx-a", "", "")
	var inv *oplist.InvalidInputError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "by", inv.Field)
	o, err = r.Owed(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, o.Count)
	require.Equal(t, "39.50", o.Amount)
	require.Equal(t, 3, o.Total)
}
