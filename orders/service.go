package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/jmoiron/sqlx"
)

// ServiceConfig configures a Service. Zero values take the defaults given.
type ServiceConfig struct {
	// Logger. Default: discard.
	Logger *slog.Logger
	// LockTries is how often Pay tries the order's lock (redsync retries
	// every 50-250ms) before giving up. Default 32, redsync's default.
	LockTries int
}

// Service is the order service's side of the rules: placing an order and
// paying it. It shares the close path's lock keys and lock order, so a
// payment and a close of the same order exclude each other, and the
// status CAS on both sides decides which one wins.
type Service struct {
	db     *sqlx.DB
	locker *Locker
	store  store
	tries  int
	log    *slog.Logger
}

// NewService returns a Service over db and locker.
func NewService(db *sqlx.DB, locker *Locker, cfg ServiceConfig) (*Service, error) {
	if db == nil || locker == nil {
		return nil, errors.New("orders: NewService needs a database and a locker")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tries := cmp.Or(cfg.LockTries, 32)
	if tries < 1 {
		return nil, fmt.Errorf("orders: lock tries %d below 1", tries)
	}
	return &Service{db: db, locker: locker, tries: tries, log: log.With("component", "orders.service")}, nil
}

// PayOutcome is the result of Pay.
type PayOutcome int

// Pay outcomes.
const (
	// PayPaid: the order was unpaid and is now paid.
	PayPaid PayOutcome = iota + 1
	// PayAlreadyClosed: the order had been closed (timed out); it stays
	// closed, and a payment of a closed order is recorded once in
	// payment_conflict: a refund is owed.
	PayAlreadyClosed
	// PayAlreadyPaid: the order had been paid before; nothing changed.
	PayAlreadyPaid
)

func (p PayOutcome) String() string {
	switch p {
	case PayPaid:
		return "paid"
	case PayAlreadyClosed:
		return "already_closed"
	case PayAlreadyPaid:
		return "already_paid"
	}
	return "unknown"
}

// Pay records the payment of an unpaid order: under a redsync mutex on the
// order's lock key (the same key the close path locks), one transaction
// moves the order from unpaid to paid (status CAS), consumes its items'
// locked stock in sku order and marks its coupon used. An order past its
// timeout but not yet closed can still be paid: the first to lock wins. A
// payment that loses to the close never revives the order: it returns
// PayAlreadyClosed and, in the same transaction, records the payment in
// payment_conflict (once per order), so the business refunds it.
// Returns ErrOrderNotFound for an unknown order number.
func (s *Service) Pay(ctx context.Context, orderNo string) (PayOutcome, error) {
	m := s.locker.Redsync().NewMutex(s.locker.KeyFor(orderNo),
		redsync.WithExpiry(s.locker.TTL()), redsync.WithTries(s.tries))
	if err := m.LockContext(ctx); err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err() // redsync returns ErrFailed on cancellation
		}
		return 0, fmt.Errorf("pay order %s: lock: %w", orderNo, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if _, err := m.UnlockContext(uctx); err != nil {
			s.log.WarnContext(ctx, "release payment lock", "order_no", orderNo, "error", err.Error())
		}
	}()

	var out PayOutcome
	err := inTx(ctx, s.db, func(tx *sqlx.Tx) error {
		o, ok, err := s.store.lockOrderByNo(ctx, tx, orderNo)
		switch {
		case err != nil:
			return err
		case !ok:
			return ErrOrderNotFound
		case o.Status == statusPaid || o.Status == statusShipped || o.Status == statusCompleted: // a repeated callback
			out = PayAlreadyPaid
			return nil
		case o.Status != statusUnpaid:
			out = PayAlreadyClosed
			return s.recordLatePayment(ctx, tx, o)
		}
		items, err := s.store.orderItems(ctx, tx, []string{orderNo})
		if err != nil {
			return err
		}
		deltas := sumDeltas([]*candidate{{orderRow: o, items: items}})
		if n, err := s.store.payOrder(ctx, tx, o.ID); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("pay order %s: status changed under lock", orderNo)
		}
		if len(deltas) > 0 {
			if _, err := s.store.lockStock(ctx, tx, deltaIDs(deltas)); err != nil {
				return err
			}
			if n, err := s.store.consumeStock(ctx, tx, deltas); err != nil {
				return err
			} else if n != int64(len(deltas)) {
				return fmt.Errorf("pay order %s: locked stock of %d skus does not cover the order", orderNo, int64(len(deltas))-n)
			}
		}
		if o.CouponID.Valid {
			if n, err := s.store.useCoupon(ctx, tx, o.CouponID.Int64, orderNo); err != nil {
				return err
			} else if n != 1 {
				return fmt.Errorf("pay order %s: coupon %d is not locked by the order", orderNo, o.CouponID.Int64)
			}
		}
		if !time.Now().Before(m.Until()) {
			return ErrLeaseExpired
		}
		out = PayPaid
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pay order %s: %w", orderNo, err)
	}
	return out, nil
}

// Item is one order line.
type Item struct {
	SKUID    int64
	Quantity int64
}

// NewOrder is an order to place.
type NewOrder struct {
	OrderNo string
	UserID  int64
	Items   []Item
	// CouponID is an unused coupon to lock for the order; 0 for none.
	CouponID int64
	// TimeoutMinutes is the payment timeout. Default 30.
	TimeoutMinutes int
}

// PlaceOrder inserts an unpaid order stamped with the database clock, moves
// its quantities from available to locked stock and locks its coupon, in one
// transaction. Returns ErrOutOfStock (also for an unknown SKU) or
// ErrCouponUnavailable, wrapped, when the order cannot be placed, and the id
// of the new order.
func (s *Service) PlaceOrder(ctx context.Context, o NewOrder) (int64, error) {
	if o.OrderNo == "" || len(o.Items) == 0 {
		return 0, errors.New("orders: an order needs a number and at least one item")
	}
	cd := &candidate{}
	for _, it := range o.Items {
		if it.Quantity <= 0 {
			return 0, fmt.Errorf("orders: item of sku %d has quantity %d", it.SKUID, it.Quantity)
		}
		cd.items = append(cd.items, itemRow{SKUID: it.SKUID, Quantity: it.Quantity})
	}
	deltas := sumDeltas([]*candidate{cd})
	timeout := cmp.Or(o.TimeoutMinutes, 30)
	var id int64
	err := inTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if id, err = s.store.insertOrder(ctx, tx, o, timeout); err != nil {
			return err
		}
		if err := s.store.insertItems(ctx, tx, o.OrderNo, o.Items); err != nil {
			return err
		}
		if _, err := s.store.lockStock(ctx, tx, deltaIDs(deltas)); err != nil {
			return err
		}
		if n, err := s.store.reserveStock(ctx, tx, deltas); err != nil {
			return err
		} else if n != int64(len(deltas)) {
			return ErrOutOfStock
		}
		if o.CouponID != 0 {
			if n, err := s.store.lockCouponForOrder(ctx, tx, o.CouponID, o.OrderNo); err != nil {
				return err
			} else if n != 1 {
				return ErrCouponUnavailable
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("place order %s: %w", o.OrderNo, err)
	}
	return id, nil
}

// IssueCoupon gives userID a new unused coupon and returns its id.
func (s *Service) IssueCoupon(ctx context.Context, userID int64) (int64, error) {
	return s.store.insertCoupon(ctx, s.db, userID)
}

// AddStock creates the SKU's inventory row or adds qty to its available stock.
func (s *Service) AddStock(ctx context.Context, sku, qty int64) error {
	return s.store.addStock(ctx, s.db, sku, qty)
}

func deltaIDs(deltas []skuDelta) []int64 {
	ids := make([]int64, len(deltas))
	for i, d := range deltas {
		ids[i] = d.SKUID
	}
	return ids
}
