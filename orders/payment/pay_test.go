package payment_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// conflictRow is one payment_conflict row as the tests read it.
type conflictRow struct {
	PaymentID string `db:"payment_id"`
	OrderNo   string `db:"order_no"`
	Amount    string `db:"pay_amount"`
	Reason    string `db:"reason"`
	Channel   string `db:"channel"`
	Refund    string `db:"refund_status"`
}

func (b *testBundle) conflicts(t *testing.T) []conflictRow {
	t.Helper()
	var rows []conflictRow
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows,
		`SELECT payment_id, order_no, pay_amount, reason, channel, refund_status FROM payment_conflict ORDER BY id`))
	return rows
}

// Two distinct late payments of one closed order (two channels) owe two
// refunds, each with its amount; their repeated notifications owe nothing
// more.
func TestTwoLatePaymentsTwoConflictRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "LATE-1", true, payment.Item{SKUID: 1, Quantity: 1})
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_info SET pay_amount = 59.90 WHERE order_no = 'LATE-1'`)
	require.NoError(t, err)
	base := b.Snapshot(t)
	out, err := b.lateCloser(t, 31*time.Minute, orders.CloserConfig{}).CloseOrder(b.Ctx, "LATE-1")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeClosed, out)

	for range 2 {
		pay, err := b.Svc.PayWith(b.Ctx, "LATE-1", payment.Notice{PaymentID: "wx-4200001", Amount: "59.90", Channel: "wechat"})
		require.NoError(t, err)
		require.Equal(t, payment.AlreadyClosed, pay)
		pay, err = b.Svc.PayWith(b.Ctx, "LATE-1", payment.Notice{PaymentID: "ali-2026113022", Amount: "59.9", Channel: "alipay"})
		require.NoError(t, err)
		require.Equal(t, payment.AlreadyClosed, pay)
	}
	require.Equal(t, []conflictRow{
		{PaymentID: "wx-4200001", OrderNo: "LATE-1", Amount: "59.90", Reason: "late", Channel: "wechat", Refund: "owed"},
		{PaymentID: "ali-2026113022", OrderNo: "LATE-1", Amount: "59.90", Reason: "late", Channel: "alipay", Refund: "owed"},
	}, b.conflicts(t))
	require.Equal(t, 2, b.Count(t, `SELECT status FROM order_info WHERE order_no = 'LATE-1'`), "still closed")
	b.Check(t, base)
	require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
}

// A second, distinct payment of an order already paid is a refund owed; a
// repeat of the payment that paid it, or a payment without an id of its
// own (Pay), is not.
func TestDuplicatePaymentOfPaidOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "DUP-1", false, payment.Item{SKUID: 2, Quantity: 3})
	base := b.Snapshot(t)
	steps := []struct {
		n    payment.Notice
		want payment.Outcome
	}{
		{payment.Notice{PaymentID: "wx-1", Amount: "10.00", Channel: "wechat"}, payment.Paid},
		{payment.Notice{PaymentID: "wx-1", Amount: "10.00", Channel: "wechat"}, payment.AlreadyPaid},
		{payment.Notice{PaymentID: "ali-9", Amount: "10.00", Channel: "alipay"}, payment.Duplicate},
		{payment.Notice{PaymentID: "ali-9", Amount: "10.00", Channel: "alipay"}, payment.Duplicate},
	}
	for i, s := range steps {
		got, err := b.Svc.PayWith(b.Ctx, "DUP-1", s.n)
		require.NoError(t, err, "step %d", i)
		require.Equal(t, s.want, got, "step %d", i)
	}
	got, err := b.Svc.Pay(b.Ctx, "DUP-1")
	require.NoError(t, err)
	require.Equal(t, payment.AlreadyPaid, got, "without an id of its own, a payment of a paid order is taken as a repeat")
	require.Equal(t, []conflictRow{{PaymentID: "ali-9", OrderNo: "DUP-1", Amount: "10.00", Reason: "duplicate", Channel: "alipay", Refund: "owed"}},
		b.conflicts(t))
	var paid string
	require.NoError(t, b.DB.GetContext(b.Ctx, &paid, `SELECT payment_id FROM order_payment WHERE order_no = 'DUP-1'`))
	require.Equal(t, "wx-1", paid)
	b.checkPaid(t, base, "DUP-1")
	require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))

	for _, bad := range []payment.Notice{{}, {PaymentID: "legacy:DUP-1"}, {PaymentID: "x", Amount: "1,50"}, {PaymentID: "has space"}} {
		_, err := b.Svc.PayWith(b.Ctx, "DUP-1", bad)
		var inv *oplist.InvalidInputError
		require.ErrorAs(t, err, &inv, "%+v", bad)
	}
}

// checkPaid checks the invariants with no for the paid order: its stock
// consumed, nothing else changed.
func (b *testBundle) checkPaid(t *testing.T, base *ordertest.Baseline, no string) {
	t.Helper()
	require.Equal(t, 1, b.Count(t, `SELECT status FROM order_info WHERE order_no = ?`, no))
	b.Check(t, base)
}

// With Redis down, Pay goes on under the row lock and status CAS: an unpaid
// order past its deadline but not yet closed is paid at once, and the close
// job, once Redis is back, never closes it.
func TestPayWithRedisStopped(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	b := setup(t, paytest.WithLocker(orderlock.Config{Client: rdb}))
	b.Shop(t)
	b.Place(t, "NOREDIS-1", true, payment.Item{SKUID: 3, Quantity: 2})
	b.Place(t, "NOREDIS-2", false, payment.Item{SKUID: 3, Quantity: 1})
	base := b.Snapshot(t)
	srv.Stop()

	start := time.Now()
	out, err := b.Svc.PayWith(b.Ctx, "NOREDIS-1", payment.Notice{PaymentID: "wx-77"})
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)
	require.Less(t, time.Since(start), 2*time.Second, "no waiting through every lock try")

	srv.Start()
	st, err := b.lateCloser(t, 31*time.Minute, orders.CloserConfig{}).Run(b.Ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed, "the other order, not the paid one: %s", st)
	require.Equal(t, 1, b.Count(t, `SELECT status FROM order_info WHERE order_no = 'NOREDIS-1'`), "paid, never closed")
	require.Equal(t, 2, b.Count(t, `SELECT status FROM order_info WHERE order_no = 'NOREDIS-2'`))
	b.Check(t, base)
	require.NoError(t, ordertest.CheckPayments(b.Ctx, b.DB))
}

// A lock held by someone else (a close in progress) is waited for, not
// taken for an outage: after the tries, Pay fails and changes nothing.
func TestPayWaitsForLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc, err := payment.NewService(b.DB.DB, b.Locker, payment.ServiceConfig{LockTries: 2})
	require.NoError(t, err)
	b.Shop(t)
	b.Place(t, "HELD-P", false, payment.Item{SKUID: 4, Quantity: 1})
	lease, err := b.Locker.Acquire(b.Ctx, []string{"HELD-P"})
	require.NoError(t, err)
	_, err = svc.Pay(b.Ctx, "HELD-P")
	require.ErrorIs(t, err, payment.ErrOrderLocked)
	require.Zero(t, b.Count(t, `SELECT status FROM order_info WHERE order_no = 'HELD-P'`))
	require.NoError(t, lease.Release(b.Ctx))
	out, err := svc.Pay(b.Ctx, "HELD-P")
	require.NoError(t, err)
	require.Equal(t, payment.Paid, out)
}

// A payment chosen as the victim of a deadlock is run again, not failed:
// InnoDB rolled it back whole, so nothing of it was applied. The deadlock
// is made on purpose: another transaction, heavier (it has changed more
// rows, so InnoDB rolls the payment back, not it), holds the order's stock
// row while the payment holds the order row and waits for the stock; the
// other one then asks for the order row.
func TestPayRunAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Shop(t)
	b.Place(t, "DEADLOCK-P", true, payment.Item{SKUID: 4, Quantity: 2})
	ctx := b.Ctx
	_, err := b.DB.ExecContext(ctx, `CREATE TABLE ballast (id INT PRIMARY KEY, n INT NOT NULL)`)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(ctx, `INSERT INTO ballast SELECT seq, 0 FROM seq_1_to_300`)
	require.NoError(t, err)

	other, err := b.DB.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, `UPDATE ballast SET n = n + 1`)
	require.NoError(t, err)
	_, err = other.ExecContext(ctx, `SELECT available FROM inventory WHERE sku_id = 4 FOR UPDATE`)
	require.NoError(t, err)

	type result struct {
		out payment.Outcome
		err error
	}
	paid := make(chan result, 1)
	go func() {
		out, err := b.Svc.Pay(ctx, "DEADLOCK-P")
		paid <- result{out, err}
	}()
	// The payment waits for the stock row other holds. (PROCESSLIST, not
	// INNODB_LOCK_WAITS: InnoDB refreshes that one only when nobody has
	// read it for 100 ms, which parallel tests polling it never allow.)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.DB.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE '%FROM inventory%FOR UPDATE%' AND TIME_MS > 50`))
		return n > 0
	}, 10*time.Second, 20*time.Millisecond)
	// Now other waits for the payment's order row: a deadlock, and the
	// payment, the lighter one, is rolled back.
	_, err = other.ExecContext(ctx, `SELECT status FROM order_info WHERE order_no = 'DEADLOCK-P' FOR UPDATE`)
	require.NoError(t, err, "InnoDB should roll back the lighter transaction, the payment")
	require.NoError(t, other.Rollback())

	r := <-paid
	require.NoError(t, r.err)
	require.Equal(t, payment.Paid, r.out)
	available, locked := b.stock(t, 4)
	require.Equal(t, []int64{98, 0}, []int64{available, locked}, "the stock consumed once")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_payment WHERE order_no = 'DEADLOCK-P'`))
}
