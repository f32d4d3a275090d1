package orders

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
)

// This file holds outbox-mode compensation: when stock and coupons live in
// other services, the close transaction does not touch the local inventory
// and user_coupon tables; it writes one event per order and service into
// order_outbox instead, in the same transaction, so an event exists exactly
// when its close committed. The Relay (relay.go) delivers them afterwards.

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

// Outbox event types (order_outbox.event_type).
const (
	// EventStockRelease gives an order's quantities back to available
	// stock; its payload is a StockReleaseEvent.
	EventStockRelease = "stock.release"
	// EventCouponRestore gives an order's coupon back to its user; its
	// payload is a CouponRestoreEvent.
	EventCouponRestore = "coupon.restore"
)

// StockReleaseEvent is the JSON payload of a stock.release event.
type StockReleaseEvent struct {
	EventType string `json:"eventType"` // "stock.release"
	OrderNo   string `json:"orderNo"`
	Reason    string `json:"reason"` // the close reason, e.g. payment_timeout
	// Items are the order's quantities summed per SKU, in ascending sku
	// order.
	Items []EventItem `json:"items"`
}

// EventItem is one SKU's quantity to release.
type EventItem struct {
	SKUID    int64 `json:"skuId"`
	Quantity int64 `json:"quantity"`
}

// CouponRestoreEvent is the JSON payload of a coupon.restore event.
type CouponRestoreEvent struct {
	EventType string `json:"eventType"` // "coupon.restore"
	OrderNo   string `json:"orderNo"`
	Reason    string `json:"reason"`
	CouponID  int64  `json:"couponId"`
}

// IdempotencyKey is the key receivers dedupe an event on:
// "{orderNo}:{eventType}". The relay sends it in the Idempotency-Key header;
// order_outbox's unique key (order_no, event_type) holds one event per key.
func IdempotencyKey(orderNo, eventType string) string { return orderNo + ":" + eventType }

// outboxRow is one event to insert.
type outboxRow struct {
	EventType string
	OrderNo   string
	Payload   []byte
	TraceID   string
}

// enqueueCompensation writes the outbox events of the orders being closed,
// inside the close transaction. Each order's events share a fresh trace id.
func (c *Closer) enqueueCompensation(ctx context.Context, tx *sqlx.Tx, good []*candidate) error {
	ids, err := newTraceIDs(len(good))
	if err != nil {
		return err
	}
	rows := make([]outboxRow, 0, 2*len(good))
	for i, cd := range good {
		if deltas := sumDeltas([]*candidate{cd}); len(deltas) > 0 {
			ev := StockReleaseEvent{EventType: EventStockRelease, OrderNo: cd.OrderNo, Reason: c.cfg.Reason,
				Items: make([]EventItem, len(deltas))}
			for k, d := range deltas {
				ev.Items[k] = EventItem{SKUID: d.SKUID, Quantity: d.Qty}
			}
			p, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			rows = append(rows, outboxRow{EventType: EventStockRelease, OrderNo: cd.OrderNo, Payload: p, TraceID: ids[i]})
		}
		if cd.CouponID.Valid {
			p, err := json.Marshal(CouponRestoreEvent{EventType: EventCouponRestore, OrderNo: cd.OrderNo,
				Reason: c.cfg.Reason, CouponID: cd.CouponID.Int64})
			if err != nil {
				return err
			}
			rows = append(rows, outboxRow{EventType: EventCouponRestore, OrderNo: cd.OrderNo, Payload: p, TraceID: ids[i]})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return c.store.insertOutbox(ctx, tx, rows)
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
