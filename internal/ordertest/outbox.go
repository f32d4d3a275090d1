package ordertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// OutboxOptions tune CheckOutbox.
type OutboxOptions struct {
	// Delivered also requires every outbox event to be delivered (status
	// 'done' with a delivery time).
	Delivered bool
}

// outboxExempt are Check's rules that outbox mode breaks on purpose: a close
// leaves local stock locked and coupons held, since the inventory and coupon
// services give them back. CheckOutbox replaces them with outbox rules.
var outboxExempt = []string{"stock_locked", "closed_coupon_held", "coupon_locked_not_unpaid"}

// CheckOutbox is Check for data whose orders were all closed in outbox mode
// (orders.CompensateOutbox), where the close writes events instead of
// changing local stock and coupons. It runs Check's rules except those the
// outbox mode breaks on purpose, and instead requires:
//
//   - stock: per SKU, locked equals the quantities of unpaid orders plus
//     those of closed orders that have a stock.release event (closing leaves
//     local stock alone);
//   - a closed order's coupon is still locked by it; no coupon is locked by
//     an order that is neither unpaid nor closed;
//   - every closed order with items has exactly one stock.release event
//     whose items are the order's, summed per SKU; every closed order with a
//     coupon exactly one coupon.restore event naming that coupon; every
//     event belongs to a closed order;
//   - with opt.Delivered, every event is delivered.
//
// Like Check, it returns nil, a *ViolationsError, or a read error.
func CheckOutbox(ctx context.Context, db sqlx.QueryerContext, base *Baseline, opt OutboxOptions) error {
	vs := &violations{perRule: map[string]int{}}
	err := Check(ctx, db, base)
	var ve *ViolationsError
	switch {
	case errors.As(err, &ve):
		for _, v := range ve.Violations {
			if !slices.Contains(outboxExempt, v.Rule) {
				vs.list = append(vs.list, v)
			}
		}
	case err != nil:
		return err
	}
	add := vs.limited

	// Stock: closing left it locked.
	inv, qty, err := readStock(ctx, db)
	if err != nil {
		return err
	}
	var closedQty []struct {
		SKUID int64 `db:"sku_id"`
		Qty   int64 `db:"qty"`
	}
	if err := sqlx.SelectContext(ctx, db, &closedQty, outboxClosedQuantitiesSQL); err != nil {
		return fmt.Errorf("ordertest: sum closed orders' quantities: %w", err)
	}
	held := map[int64]int64{}
	for _, r := range closedQty {
		held[r.SKUID] = r.Qty
	}
	for _, r := range inv {
		if _, ok := base.Stock[r.SKUID]; !ok {
			continue
		}
		if want := qty[r.SKUID][0] + held[r.SKUID]; r.Locked != want {
			add("outbox_stock_locked", "sku %d: locked %d, unpaid orders hold %d and outbox-closed orders %d",
				r.SKUID, r.Locked, qty[r.SKUID][0], held[r.SKUID])
		}
	}

	for _, r := range outboxRules {
		if !opt.Delivered && r.name == "outbox_undelivered" {
			continue
		}
		var nos []string
		if err := sqlx.SelectContext(ctx, db, &nos, r.query); err != nil {
			return fmt.Errorf("ordertest: rule %s: %w", r.name, err)
		}
		if len(nos) > 0 {
			add(r.name, "%d: %s (e.g. %s)", len(nos), r.what, strings.Join(nos[:min(len(nos), 5)], ", "))
		}
	}

	// Payloads: the items and coupon of each event are the order's.
	if err := checkPayloads(ctx, db, add); err != nil {
		return err
	}
	if len(vs.list) == 0 {
		return nil
	}
	return &ViolationsError{Violations: vs.list}
}

// checkPayloads compares each event's payload with its order.
func checkPayloads(ctx context.Context, db sqlx.QueryerContext, add func(rule, format string, args ...any)) error {
	var evs []struct {
		OrderNo   string `db:"order_no"`
		EventType string `db:"event_type"`
		Payload   []byte `db:"payload"`
		CouponID  *int64 `db:"coupon_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &evs, outboxEventsSQL); err != nil {
		return fmt.Errorf("ordertest: read outbox events: %w", err)
	}
	var items []struct {
		OrderNo string `db:"order_no"`
		SKUID   int64  `db:"sku_id"`
		Qty     int64  `db:"qty"`
	}
	if err := sqlx.SelectContext(ctx, db, &items, outboxOrderItemsSQL); err != nil {
		return fmt.Errorf("ordertest: read closed orders' items: %w", err)
	}
	want := map[string]map[int64]int64{}
	for _, it := range items {
		if want[it.OrderNo] == nil {
			want[it.OrderNo] = map[int64]int64{}
		}
		want[it.OrderNo][it.SKUID] = it.Qty
	}
	for _, ev := range evs {
		var p EventBody
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.OrderNo != ev.OrderNo || p.EventType != ev.EventType {
			add("outbox_payload", "order %s %s: payload %q does not name its order and type", ev.OrderNo, ev.EventType, ev.Payload)
			continue
		}
		switch ev.EventType {
		case "stock.release":
			got := map[int64]int64{}
			for _, it := range p.Items {
				got[it.SKUID] += it.Quantity
			}
			if !mapsEqual(got, want[ev.OrderNo]) {
				add("outbox_payload", "order %s: stock.release items %v, order has %v", ev.OrderNo, got, want[ev.OrderNo])
			}
		case "coupon.restore":
			if ev.CouponID == nil || p.CouponID != *ev.CouponID {
				add("outbox_payload", "order %s: coupon.restore names coupon %d, order has %v", ev.OrderNo, p.CouponID, ev.CouponID)
			}
		default:
			add("outbox_payload", "order %s: unknown event type %q", ev.OrderNo, ev.EventType)
		}
	}
	return nil
}

func mapsEqual(a, b map[int64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// outboxClosedQuantitiesSQL sums, per SKU, the item quantities of closed
// orders that have a stock.release event.
const outboxClosedQuantitiesSQL = `
SELECT it.sku_id, SUM(it.quantity) AS qty
FROM order_item it
JOIN order_info o ON o.order_no = it.order_no
JOIN order_outbox e ON e.order_no = o.order_no AND e.event_type = 'stock.release'
WHERE o.status = 2
GROUP BY it.sku_id`

// outboxEventsSQL reads every event with its order's coupon.
const outboxEventsSQL = `
SELECT e.order_no, e.event_type, e.payload, o.coupon_id
FROM order_outbox e LEFT JOIN order_info o ON o.order_no = e.order_no`

// outboxOrderItemsSQL sums the items of orders that have events, per order
// and SKU.
const outboxOrderItemsSQL = `
SELECT it.order_no, it.sku_id, SUM(it.quantity) AS qty
FROM order_item it
WHERE it.order_no IN (SELECT order_no FROM order_outbox)
GROUP BY it.order_no, it.sku_id`

// outboxRules return one order_no per offending row; none must come back.
var outboxRules = []struct{ name, what, query string }{
	{"outbox_stock_missing", "closed orders with items without exactly one stock.release event", `
SELECT o.order_no FROM order_info o
WHERE o.status = 2 AND EXISTS (SELECT 1 FROM order_item it WHERE it.order_no = o.order_no)
  AND (SELECT COUNT(*) FROM order_outbox e WHERE e.order_no = o.order_no AND e.event_type = 'stock.release') <> 1`},
	{"outbox_coupon_missing", "closed orders with a coupon without exactly one coupon.restore event", `
SELECT o.order_no FROM order_info o
WHERE o.status = 2 AND o.coupon_id IS NOT NULL
  AND (SELECT COUNT(*) FROM order_outbox e WHERE e.order_no = o.order_no AND e.event_type = 'coupon.restore') <> 1`},
	{"outbox_not_closed", "outbox events whose order is not closed", `
SELECT e.order_no FROM order_outbox e LEFT JOIN order_info o ON o.order_no = e.order_no
WHERE o.id IS NULL OR o.status <> 2`},
	{"outbox_closed_coupon_changed", "closed orders whose coupon is no longer locked by them (outbox mode leaves it)", `
SELECT o.order_no FROM order_info o LEFT JOIN user_coupon c ON c.id = o.coupon_id
WHERE o.status = 2 AND o.coupon_id IS NOT NULL
  AND (c.id IS NULL OR c.status <> 1 OR NOT (c.order_no <=> o.order_no))`},
	{"coupon_locked_not_open", "coupons locked (status 1) by an order neither unpaid nor closed", `
SELECT COALESCE(c.order_no, CONCAT('coupon ', c.id)) AS order_no FROM user_coupon c
LEFT JOIN order_info o ON o.order_no = c.order_no
WHERE c.status = 1 AND (o.id IS NULL OR o.status NOT IN (0, 2))`},
	{"outbox_undelivered", "outbox events not delivered", `
SELECT order_no FROM order_outbox WHERE status <> 'done' OR delivered_at IS NULL`},
}

// EventBody is an outbox event's JSON body as the receiving services read
// it. It is declared here, apart from package outbox's payload types, so
// that tests hold the wire format and not the types that write it.
type EventBody struct {
	EventType string `json:"eventType"`
	OrderNo   string `json:"orderNo"`
	Items     []struct {
		SKUID    int64 `json:"skuId"`
		Quantity int64 `json:"quantity"`
	} `json:"items"`
	CouponID int64 `json:"couponId"`
}
