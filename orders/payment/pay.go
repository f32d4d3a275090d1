package payment

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
)

// Outcome is the result of Pay and PayWith.
type Outcome int

// Pay outcomes.
const (
	// Paid: the order was unpaid and is now paid, with this payment.
	Paid Outcome = iota + 1
	// AlreadyClosed: the order had been closed (timed out); it stays
	// closed, and the payment is recorded in payment_conflict (reason
	// late, once per payment id): a refund is owed.
	AlreadyClosed
	// AlreadyPaid: the order had been paid before with this payment (a
	// repeated notification), or with a payment it cannot be told from;
	// nothing changed.
	AlreadyPaid
	// Duplicate: the order had been paid with another payment; this one
	// is recorded in payment_conflict (reason duplicate, once per payment
	// id): a refund is owed.
	Duplicate
)

func (p Outcome) String() string {
	switch p {
	case Paid:
		return "paid"
	case AlreadyClosed:
		return "already_closed"
	case AlreadyPaid:
		return "already_paid"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// Notice is a payment notification as the payment side sends it.
type Notice struct {
	// PaymentID is the payment side's id of this payment (a WeChat Pay
	// transaction_id, an Alipay trade_no): 1-128 printable ASCII
	// characters, not starting with legacyPaymentIDPrefix. Notifications
	// of one payment repeat it; two payments of one order have two.
	PaymentID string
	// Amount is what was paid, in the currency's main unit as a decimal
	// ("12.30", at most 10 digits before the point and 2 after). Empty
	// means the order's pay_amount.
	Amount string
	// Channel names the payment channel ("wechat", "alipay"), at most 32
	// characters; optional, recorded with the payment.
	Channel string
}

// legacyPaymentIDPrefix starts the payment id Pay derives for a payment
// that has none: "legacy:" + order number, which is also what
// payment_conflict rows written before payment ids were recorded carry.
const legacyPaymentIDPrefix = "legacy:"

// ErrOrderLocked is returned by Pay and PayWith when the order's lock stayed
// held by someone else (a close in progress) through every try.
var ErrOrderLocked = errors.New("orders: the order's lock is held elsewhere")

var (
	paymentIDRe = regexp.MustCompile(`^[!-~]{1,128}$`)
	amountRe    = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,2})?$`)
)

func (n Notice) validate() error {
	switch {
	case !paymentIDRe.MatchString(n.PaymentID):
		return oplist.Invalid("paymentId", "payment id %q is not 1-128 printable ASCII characters", n.PaymentID)
	case strings.HasPrefix(n.PaymentID, legacyPaymentIDPrefix):
		return oplist.Invalid("paymentId", "payment ids starting with %q are Pay's own", legacyPaymentIDPrefix)
	case n.Amount != "" && !amountRe.MatchString(n.Amount):
		return oplist.Invalid("amount", "amount %q is not a decimal like 12.30", n.Amount)
	case len(n.Channel) > 32:
		return oplist.Invalid("channel", "channel is %d characters, at most 32", len(n.Channel))
	}
	return nil
}

// Pay records a payment of the order without a payment id or amount of its
// own: PayWith with the payment id legacyPaymentIDPrefix + orderNo and the
// order's pay_amount. Repeated calls are one payment; a payment of an order
// already paid is taken as a repeat (it cannot be told from one).
func (s *Service) Pay(ctx context.Context, orderNo string) (Outcome, error) {
	return s.pay(ctx, orderNo, Notice{PaymentID: legacyPaymentIDPrefix + orderNo})
}

// PayWith records the payment n of an unpaid order: under the order's lock
// (the key the close path locks), one transaction moves the order from
// unpaid to paid (status CAS), consumes its items' locked stock in sku
// order, marks its coupon used and records n as the order's payment
// (order_payment). An order past its timeout but not yet closed can still
// be paid: the first to lock wins. A payment that loses to the close never
// revives the order: AlreadyClosed, and n is recorded in
// payment_conflict (reason late). A payment of an order paid with another
// payment is Duplicate, recorded the same way (reason duplicate); a
// repeat of the one that paid it is AlreadyPaid. Each payment id gets at
// most one conflict row, however often the notification repeats. Returns
// orders.ErrOrderNotFound for an unknown order, an *InvalidInputError for a bad
// notice.
//
// When Redis is unreachable (no quorum of the lock nodes answers, as
// opposed to the lock being held by someone else), the payment goes on
// without the lock: the order's row lock and the status CAS are the fence
// that decides between a payment and a close, so nothing is paid and closed
// both; what is traded is in docs/payments-and-outbox.md. A lock held
// elsewhere is waited for, LockTries times, then ErrOrderLocked.
func (s *Service) PayWith(ctx context.Context, orderNo string, n Notice) (Outcome, error) {
	if err := n.validate(); err != nil {
		return 0, err
	}
	return s.pay(ctx, orderNo, n)
}

func (s *Service) pay(ctx context.Context, orderNo string, n Notice) (Outcome, error) {
	lease, err := s.lockForPay(ctx, orderNo)
	if err != nil {
		return 0, fmt.Errorf("pay order %s: %w", orderNo, err)
	}
	defer func() {
		if err := lease.Release(ctx); err != nil {
			s.log.WarnContext(ctx, "release payment lock", "order_no", orderNo, "error", err.Error())
		}
	}()
	derived := strings.HasPrefix(n.PaymentID, legacyPaymentIDPrefix)
	// On a Galera cluster, a close committed through another node just
	// before its lock was released may not be applied here yet: the order
	// is read after a causal wait, or the payment would act on an unpaid
	// order whose stock and coupon are already back.
	galera, err := sqlexec.Galera(ctx, s.db)
	if err != nil {
		return 0, fmt.Errorf("pay order %s: %w", orderNo, err)
	}
	var out Outcome
	// A deadlock rolled the payment back whole: nothing of it was applied,
	// and run again it sees the order as it is now. Under the order's lock
	// and with stock rows taken in sku order, the close does not deadlock
	// with it on one server; but a Galera cluster reports a conflict with
	// a close committed through another node on the same stock rows as a
	// deadlock at commit, and a shop's own statements may take rows in any
	// order. The notification's sender should not see that as a failed
	// payment. Not once the lease is over: no run could commit. Not after
	// a lock wait timeout either, which spent innodb_lock_wait_timeout.
	err = backoff.Retry(ctx, backoff.Contention, backoff.DeadlockRuns, func(ctx context.Context, _ int) (bool, error) {
		err := sqlexec.InCausalTx(ctx, s.db, galera, func(tx *sqlx.Tx) (err error) {
			out, err = s.payTx(ctx, tx, lease, orderNo, n, derived)
			return err
		})
		return dbserver.ServerUnknown.RolledBack(err) && (lease == nil || lease.ValidFor(0)), err
	})
	if err != nil {
		return 0, fmt.Errorf("pay order %s: %w", orderNo, err)
	}
	return out, nil
}

// payTx is one run of the payment's transaction: it reads the locked order
// and records n as its payment, a repeat, a duplicate or a late one.
func (s *Service) payTx(ctx context.Context, tx *sqlx.Tx, lease *orderlock.Lease, orderNo string, n Notice, derived bool) (Outcome, error) {
	o, ok, err := s.store.lockOrderByNo(ctx, tx, orderNo)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, orders.ErrOrderNotFound
	case o.Status == orderstatus.Paid || o.Status == orderstatus.Shipped || o.Status == orderstatus.Completed:
		accepted, found, err := s.store.orderPayment(ctx, tx, orderNo)
		if err != nil {
			return 0, err
		}
		if !found || derived || strings.HasPrefix(accepted, legacyPaymentIDPrefix) || accepted == n.PaymentID {
			return AlreadyPaid, nil // a repeat, or not to be told from one
		}
		return Duplicate, s.recordConflict(ctx, tx, o, n, conflictDuplicate)
	case o.Status != orderstatus.Unpaid:
		if o.Status != orderstatus.Closed {
			return AlreadyClosed, nil
		}
		return AlreadyClosed, s.recordConflict(ctx, tx, o, n, conflictLate)
	}
	if err := s.payOrder(ctx, tx, o); err != nil {
		return 0, err
	}
	if err := s.store.insertOrderPayment(ctx, tx, o, n); err != nil {
		return 0, err
	}
	if lease != nil && !lease.ValidFor(0) {
		return 0, orders.ErrLeaseExpired
	}
	return Paid, nil
}

// payOrder is the payment's changes to an unpaid, locked order: the status
// CAS, its items' locked stock consumed in sku order, its coupon used.
func (s *Service) payOrder(ctx context.Context, tx *sqlx.Tx, o order) error {
	items, err := s.store.orderItems(ctx, tx, o.OrderNo)
	if err != nil {
		return err
	}
	qty := map[int64]int64{} // per SKU
	for _, it := range items {
		qty[it.SKUID] += it.Quantity
	}
	if n, err := s.store.payOrder(ctx, tx, o.ID); err != nil {
		return err
	} else if n != 1 {
		return errors.New("status changed under lock")
	}
	if len(qty) > 0 {
		if err := s.store.lockStock(ctx, tx, qty); err != nil {
			return err
		}
		if n, err := s.store.consumeStock(ctx, tx, qty); err != nil {
			return err
		} else if n != int64(len(qty)) {
			return fmt.Errorf("locked stock of %d skus does not cover the order", int64(len(qty))-n)
		}
	}
	if o.CouponID.Valid {
		if n, err := s.store.useCoupon(ctx, tx, o.CouponID.Int64, o.OrderNo); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("coupon %d is not locked by the order", o.CouponID.Int64)
		}
	}
	return nil
}

// lockForPay takes the order's lock for a payment, trying LockTries times
// 50-250 ms apart (redsync's rhythm) while someone else holds it. It
// returns nil, without an error, when Redis is unreachable: the payment
// then goes on under the row lock and status CAS alone.
func (s *Service) lockForPay(ctx context.Context, orderNo string) (*orderlock.Lease, error) {
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, 2*s.locker.Timeout())
		lease, err := s.locker.Acquire(actx, []string{orderNo})
		cancel()
		switch {
		case lease.Held(orderNo):
			return lease, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case lease.Failed(orderNo):
			s.log.WarnContext(ctx, "Redis unreachable: paying under the order's row lock and status CAS alone",
				"order_no", orderNo, "error", fmt.Sprint(err))
			return nil, nil
		case try >= s.tries:
			return nil, fmt.Errorf("%w (%d tries)", ErrOrderLocked, try)
		}
		t := time.NewTimer(time.Duration(50+rand.IntN(201)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
