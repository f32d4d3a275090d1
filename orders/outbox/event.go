package outbox

// This file holds the event vocabulary: what the close transaction writes
// (orders.Closer in outbox mode), the relay delivers and the receivers
// dedupe on.

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
