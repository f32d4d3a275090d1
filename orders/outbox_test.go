package orders_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/outbox"
)

// localState sums the local stock and coupon tables, to show outbox mode
// leaves them alone.
func (b *testBundle) localState(t *testing.T) [2]int {
	return [2]int{
		b.Count(t, `SELECT COALESCE(SUM(sku_id * 7 + available * 3 + locked), 0) FROM inventory`),
		b.Count(t, `SELECT COALESCE(SUM(id * 5 + status), 0) + COUNT(order_no) FROM user_coupon`),
	}
}

type outboxRow struct {
	ID        int64      `db:"id"`
	EventType string     `db:"event_type"`
	OrderNo   string     `db:"order_no"`
	Payload   []byte     `db:"payload"`
	TraceID   string     `db:"trace_id"`
	Status    string     `db:"status"`
	Attempts  int        `db:"attempts"`
	ClaimID   int64      `db:"claim_id"`
	LastError string     `db:"last_error"`
	Delivered *time.Time `db:"delivered_at"`
}

func (b *testBundle) outbox(t *testing.T) []outboxRow {
	t.Helper()
	var rows []outboxRow
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT id, event_type, order_no, payload, trace_id, status,
		attempts, claim_id, last_error, delivered_at FROM order_outbox ORDER BY id`))
	return rows
}

var traceIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

// In outbox mode the close writes one stock.release event per closed order
// and one coupon.restore event per closed order with a coupon, in the close
// transaction, and leaves the local stock and coupons as they are.
func TestOutboxCloseWritesEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Compensation: orders.CompensateOutbox}))
	// Demo data: every closed order of thousands, over pages of 300 among
	// paid and not-due ones, gets its events and its own trace id.
	res, base := b.Seed(t, orderdemo.Spec{Orders: 2000, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1, CouponFraction: 0.4})
	before := b.localState(t)

	st := b.run(t, orders.RunOptions{PageSize: 300})
	require.Equal(t, res.Due, st.Closed)
	require.Zero(t, st.DeadLettered)
	require.Equal(t, before, b.localState(t), "local stock and coupons untouched")
	require.NoError(t, ordertest.CheckOutbox(b.Ctx, b.DB, base, ordertest.OutboxOptions{}))
	var ve *ordertest.ViolationsError
	require.True(t, errors.As(ordertest.Check(b.Ctx, b.DB, base), &ve), "the local checker sees stock still locked")
	require.Subset(t, ve.Rules(), []string{"stock_locked", "closed_coupon_held"})

	withCoupon := b.Count(t, `SELECT COUNT(*) FROM order_info WHERE status = 2 AND coupon_id IS NOT NULL`)
	rows := b.outbox(t)
	require.Len(t, rows, res.Due+withCoupon)
	trace := map[string]string{}
	for _, r := range rows {
		require.Equal(t, "pending", r.Status)
		require.Zero(t, r.Attempts)
		require.Nil(t, r.Delivered)
		require.Regexp(t, traceIDForm, r.TraceID)
		if prev, ok := trace[r.OrderNo]; ok {
			require.Equal(t, prev, r.TraceID, "an order's events share its trace id")
		}
		trace[r.OrderNo] = r.TraceID
		switch r.EventType {
		case outbox.EventStockRelease:
			var ev outbox.StockReleaseEvent
			require.NoError(t, json.Unmarshal(r.Payload, &ev))
			require.Equal(t, r.OrderNo, ev.OrderNo)
			require.Equal(t, orders.DefaultReason, ev.Reason)
			require.NotEmpty(t, ev.Items)
		case outbox.EventCouponRestore:
			var ev outbox.CouponRestoreEvent
			require.NoError(t, json.Unmarshal(r.Payload, &ev))
			require.Positive(t, ev.CouponID)
		default:
			t.Fatalf("event type %q", r.EventType)
		}
	}
	require.Len(t, trace, res.Due, "distinct trace ids per order")

	// Closing again finds nothing; the unique key would refuse a second
	// event anyway.
	again := b.run(t, orders.RunOptions{})
	require.Zero(t, again.Scanned)
	require.Len(t, b.outbox(t), len(rows))
}

// The outbox seam does not need local stock rows (the stock lives in the
// inventory service), but an order whose own lines are wrong is still
// dead-lettered, alone, and writes no event.
func TestOutboxValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{Compensation: orders.CompensateOutbox}))
	// Eight due orders with two units of SKU 2 each; every other one also
	// holds SKU 1, which has no local stock row. One line of O-3 is then
	// made wrong.
	const bad, qty = "O-3", 2
	due := numbered("O", 8, func(i int) ordertest.OrderOpts {
		o := ordertest.OrderOpts{Age: time.Hour, Coupon: i%3 == 0, Items: []ordertest.Item{{SKU: 2, Qty: qty}}}
		if i%2 == 0 {
			o.Items = append(o.Items, ordertest.Item{SKU: 1, Qty: 1, MissingStock: true})
		}
		return o
	})
	base := b.build(t, due...)
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_item SET quantity = 0 WHERE order_no = ? AND sku_id = 2`, bad)
	require.NoError(t, err)

	st := b.run(t, orders.RunOptions{PageSize: 3})
	require.Equal(t, len(due)-1, st.Closed, "orders on the SKU without a local stock row close too")
	require.Equal(t, 1, st.DeadLettered)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = ? AND last_error LIKE '%quantity 0%'`, bad))
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_outbox WHERE order_no = ?`, bad))

	// Fixed, the order closes through CloseOrder, which writes the same
	// events.
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_item SET quantity = ? WHERE order_no = ? AND sku_id = 2`, qty, bad)
	require.NoError(t, err)
	out, err := b.Closer.CloseOrder(b.Ctx, bad)
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_outbox WHERE order_no = ? AND event_type = 'stock.release'`, bad))
	require.NoError(t, ordertest.CheckOutbox(b.Ctx, b.DB, base, ordertest.OutboxOptions{}))
}

func TestParseCompensationMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]orders.CompensationMode{"": orders.CompensateLocal, "local": orders.CompensateLocal, "outbox": orders.CompensateOutbox} {
		got, err := orders.ParseCompensationMode(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := orders.ParseCompensationMode("remote")
	require.Error(t, err)
	require.Equal(t, "outbox", orders.CompensateOutbox.String())
}
