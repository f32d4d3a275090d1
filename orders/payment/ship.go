package payment

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderstatus"
)

// ErrOrderState means the order is not in the status the step needs (e.g.
// shipping an unpaid order).
var ErrOrderState = errors.New("orders: order is not in the status this step needs")

// The order service's steps after payment: the merchant ships a paid order
// (1 → 3, ship_time) and the buyer confirms it (3 → 4, complete_time).
// Package lifecycle completes the shipped orders buyers did not confirm and
// flags the paid orders merchants did not ship.

// Ship records that a paid order was shipped: status 1 → 3 with ship_time
// (database clock), by CAS. It reports whether this call shipped it: false
// with no error when it was shipped (or completed) already, so a retried
// call is harmless. orders.ErrOrderNotFound for an unknown order, ErrOrderState
// (wrapped, with the status) for an order that is not paid.
func (s *Service) Ship(ctx context.Context, orderNo string) (bool, error) {
	return s.step(ctx, orderNo, "ship", s.store.shipOrder, orderstatus.Shipped, orderstatus.Completed)
}

// Confirm records that the buyer confirmed receipt: status 3 → 4 with
// complete_time, by CAS. It reports whether this call completed it: false
// with no error when it was completed already. orders.ErrOrderNotFound for an
// unknown order, ErrOrderState (wrapped) for an order that is not shipped.
func (s *Service) Confirm(ctx context.Context, orderNo string) (bool, error) {
	return s.step(ctx, orderNo, "confirm", s.store.confirmOrder, orderstatus.Completed)
}

// step runs one lifecycle CAS and explains a CAS that changed nothing.
func (s *Service) step(ctx context.Context, orderNo, what string, cas func(context.Context, sqlx.ExecerContext, string) (int64, error), done ...int) (bool, error) {
	n, err := cas(ctx, s.db, orderNo)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	st, ok, err := s.store.orderStatus(ctx, s.db, orderNo)
	switch {
	case err != nil:
		return false, err
	case !ok:
		return false, fmt.Errorf("%s order %s: %w", what, orderNo, orders.ErrOrderNotFound)
	}
	for _, d := range done {
		if st == d {
			return false, nil
		}
	}
	return false, fmt.Errorf("%s order %s: status %d: %w", what, orderNo, st, ErrOrderState)
}
