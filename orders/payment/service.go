package payment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/orderlock"
)

// ServiceConfig configures a Service. Zero values take the defaults given.
type ServiceConfig struct {
	// Logger. Default: discard.
	Logger *slog.Logger
	// LockTries is how often Pay tries the order's lock (redsync retries
	// every 50-250ms) before giving up. Default 32, redsync's default.
	LockTries int
}

// Service is the order service's side of the rules: placing an order,
// paying it, shipping and confirming it. It shares the close path's lock keys and lock order, so a
// payment and a close of the same order exclude each other, and the
// status CAS on both sides decides which one wins.
type Service struct {
	db     *sqlx.DB
	locker *orderlock.Locker
	store  store
	tries  int
	log    *slog.Logger
}

// NewService returns a Service over db and locker.
func NewService(db *sqlx.DB, locker *orderlock.Locker, cfg ServiceConfig) (*Service, error) {
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

// ErrOutOfStock is returned by PlaceOrder when a SKU has too little stock.
var ErrOutOfStock = errors.New("orders: out of stock")

// ErrCouponUnavailable is returned by PlaceOrder when the coupon is not unused.
var ErrCouponUnavailable = errors.New("orders: coupon not available")

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
	qty := map[int64]int64{} // per SKU
	for _, it := range o.Items {
		if it.Quantity <= 0 {
			return 0, fmt.Errorf("orders: item of sku %d has quantity %d", it.SKUID, it.Quantity)
		}
		qty[it.SKUID] += it.Quantity
	}
	timeout := cmp.Or(o.TimeoutMinutes, 30)
	var id int64
	err := sqlexec.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if id, err = s.store.insertOrder(ctx, tx, o, timeout); err != nil {
			return err
		}
		if err := s.store.insertItems(ctx, tx, o.OrderNo, o.Items); err != nil {
			return err
		}
		if err := s.store.lockStock(ctx, tx, qty); err != nil {
			return err
		}
		if n, err := s.store.reserveStock(ctx, tx, qty); err != nil {
			return err
		} else if n != int64(len(qty)) {
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
