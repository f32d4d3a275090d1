package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/outbox"
)

// This file holds outbox-mode compensation: when stock and coupons live in
// other services, the close transaction does not touch the local inventory
// and user_coupon tables; it writes one event per order and service into
// order_outbox instead, in the same transaction, so an event exists exactly
// when its close committed. Package outbox holds the events and delivers
// them afterwards (outbox.Relay).

// CompensationMode says where a close gives back stock and coupons.
type CompensationMode int

const (
	// CompensateLocal releases stock and restores coupons in this
	// database's inventory and user_coupon tables, in the close
	// transaction. The default.
	CompensateLocal CompensationMode = iota
	// CompensateOutbox writes a stock.release and a coupon.restore event per
	// closed order (the latter only for orders with a coupon) into
	// order_outbox, in the close transaction; a Relay delivers them to the
	// inventory and coupon services. Local stock and coupons are left as
	// they are.
	CompensateOutbox
)

// ParseCompensationMode reads "local" or "outbox".
func ParseCompensationMode(s string) (CompensationMode, error) {
	switch s {
	case "local", "":
		return CompensateLocal, nil
	case "outbox":
		return CompensateOutbox, nil
	}
	return 0, fmt.Errorf("orders: compensation mode %q is not local or outbox", s)
}

func (m CompensationMode) String() string {
	switch m {
	case CompensateLocal:
		return "local"
	case CompensateOutbox:
		return "outbox"
	}
	return "unknown"
}

// enqueueCompensation writes the outbox events of the orders being closed,
// inside the close transaction. Each order's events share a fresh trace id.
func (c *Closer) enqueueCompensation(ctx context.Context, tx *sqlx.Tx, good []*candidate) error {
	ids, err := newTraceIDs(len(good))
	if err != nil {
		return err
	}
	rows := make([]outbox.Row, 0, 2*len(good))
	for i, cd := range good {
		if deltas := sumDeltas([]*candidate{cd}); len(deltas) > 0 {
			ev := outbox.StockReleaseEvent{EventType: outbox.EventStockRelease, OrderNo: cd.OrderNo, Reason: c.cfg.Reason,
				Items: make([]outbox.EventItem, len(deltas))}
			for k, d := range deltas {
				ev.Items[k] = outbox.EventItem{SKUID: d.SKUID, Quantity: d.Qty}
			}
			p, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			rows = append(rows, outbox.Row{EventType: outbox.EventStockRelease, OrderNo: cd.OrderNo, Payload: p, TraceID: ids[i]})
		}
		if cd.CouponID.Valid {
			p, err := json.Marshal(outbox.CouponRestoreEvent{EventType: outbox.EventCouponRestore, OrderNo: cd.OrderNo,
				Reason: c.cfg.Reason, CouponID: cd.CouponID.Int64})
			if err != nil {
				return err
			}
			rows = append(rows, outbox.Row{EventType: outbox.EventCouponRestore, OrderNo: cd.OrderNo, Payload: p, TraceID: ids[i]})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return outbox.Insert(ctx, tx, rows)
}

// validateOutbox is validate for outbox mode: the stock and coupons are
// another service's, so only the order's own lines are checked (every
// quantity at least 1).
func validateOutbox(cands []*candidate, bad map[string]error) {
	for _, cd := range cands {
		if i := slices.IndexFunc(cd.items, func(it itemRow) bool { return it.Quantity <= 0 }); i >= 0 {
			bad[cd.OrderNo] = &CompensationError{OrderNo: cd.OrderNo,
				Reason: fmt.Sprintf("item of sku %d has quantity %d", cd.items[i].SKUID, cd.items[i].Quantity)}
		}
	}
}

// newTraceIDs returns n random 128-bit trace ids in hex, from one read of
// the random source.
func newTraceIDs(n int) ([]string, error) {
	b := make([]byte, 16*n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("trace ids: %w", err)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = hex.EncodeToString(b[16*i : 16*i+16])
	}
	return out, nil
}
