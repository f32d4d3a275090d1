package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the operators' view of order_outbox: what waits, what
// the relays parked and why, and requeueing parked events. The CLI
// (executor outbox), the API port and the metrics read it through Ops
// (and the relay's Backlog, which is the same statement).

// Event statuses (order_outbox.status).
const (
	// Pending: to be delivered (claimed by a relay, or waiting for its
	// next attempt).
	Pending = "pending"
	// Done: acknowledged by its receiver.
	Done = "done"
	// Parked: the relays stopped trying (a permanent answer, or
	// outbox.maxAttempts failures) until an operator requeues it.
	Parked = "parked"
)

// ErrNotFound: no outbox event has that id.
var ErrNotFound = errors.New("orders: outbox event not found")

// ErrNotParked: only parked events are requeued.
var ErrNotParked = errors.New("orders: outbox event is not parked; nothing to requeue")

// Event is one row of order_outbox. Times are UTC.
type Event struct {
	ID        int64  `db:"id" json:"id"`
	EventType string `db:"event_type" json:"eventType"`
	OrderNo   string `db:"order_no" json:"orderNo"`
	// Payload is the event's body (StockReleaseEvent, CouponRestoreEvent).
	Payload json.RawMessage `db:"payload" json:"payload"`
	TraceID string          `db:"trace_id" json:"traceId"`
	// Status is Pending, Done or Parked.
	Status   string `db:"status" json:"status"`
	Attempts int    `db:"attempts" json:"attempts"`
	// NextAttemptAt is when a pending event is due (or its claim ends);
	// for a parked one when it was parked, for a delivered one when.
	NextAttemptAt time.Time  `db:"next_attempt_at" json:"nextAttemptAt"`
	LastError     string     `db:"last_error" json:"lastError"`
	ParkReason    string     `db:"park_reason" json:"parkReason"`
	ParkedAt      *time.Time `db:"parked_at" json:"parkedAt,omitempty"`
	CreatedAt     time.Time  `db:"created_at" json:"createdAt"`
	DeliveredAt   *time.Time `db:"delivered_at" json:"deliveredAt,omitempty"`
}

// Filter selects events to list.
type Filter struct {
	// Status: Pending, Parked, Done, or "" for all.
	Status string
	// EventType and OrderNo: only these; "" for all.
	EventType, OrderNo string
	// Limit is the most events returned, 1-1000. Default 50.
	Limit int
	// BeforeID pages: only events with a smaller id (0: from the newest).
	BeforeID int64
}

// List is a page of events, newest first, and the BeforeID of the next
// page (0 when this is the last).
type List struct {
	Events     []Event `json:"events"`
	NextBefore int64   `json:"nextBefore"`
}

// Stats is what waits in order_outbox, as the gauges show it.
type Stats struct {
	Pending                 int     `json:"pending"`
	OldestPendingAgeSeconds float64 `json:"oldestPendingAgeSeconds"`
	Parked                  int     `json:"parked"`
}

// Ops is the operators' view of order_outbox. It needs only the
// database, and is safe for concurrent use.
type Ops struct {
	db    *sqlx.DB
	store store
}

// NewOps returns the view over db.
func NewOps(db *sqlx.DB) *Ops { return &Ops{db: db} }

// List returns events newest first, with the next page's BeforeID.
func (o *Ops) List(ctx context.Context, f Filter) (List, error) {
	if err := oplist.CheckStatus(f.Status, Pending, Parked, Done); err != nil {
		return List{}, err
	}
	if len(f.EventType) > 32 {
		return List{}, oplist.Invalid("eventType", "event type must be at most 32 bytes")
	}
	if err := oplist.CheckOrderNo(f.OrderNo); err != nil {
		return List{}, err
	}
	if err := oplist.CheckASCII("eventType", f.EventType); err != nil {
		return List{}, err
	}
	if err := oplist.CheckPage(&f.Limit, f.BeforeID); err != nil {
		return List{}, err
	}
	evs, next, err := eventList.List(ctx, o.db, map[string]any{"status": f.Status, "event_type": f.EventType,
		"order_no": f.OrderNo, "before_id": f.BeforeID, "limit": f.Limit}, f.Limit)
	if err != nil {
		return List{}, err
	}
	return List{Events: evs, NextBefore: next}, nil
}

// Get returns one event, or ErrNotFound.
func (o *Ops) Get(ctx context.Context, id int64) (*Event, error) {
	ev, err := eventList.Get(ctx, o.db, id)
	if err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, ErrNotFound
	}
	return ev, nil
}

// Stats counts what waits and what is parked.
func (o *Ops) Stats(ctx context.Context) (Stats, error) {
	b, err := o.store.backlog(ctx, o.db)
	if err != nil {
		return Stats{}, err
	}
	return Stats{Pending: b.Pending, OldestPendingAgeSeconds: b.OldestAge.Seconds(), Parked: b.Parked}, nil
}

// Requeue gives a parked event back to the relays: pending, due now, its
// attempts counted from zero again (its last error kept). Another status
// returns the event with ErrNotParked.
func (o *Ops) Requeue(ctx context.Context, id int64) (*Event, error) {
	if _, err := o.Get(ctx, id); err != nil {
		return nil, err
	}
	ok, err := o.store.requeue(ctx, o.db, id)
	if err != nil {
		return nil, err
	}
	ev, err := o.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return ev, ErrNotParked
	}
	return ev, nil
}

// RequeueParked requeues every parked event (of eventType, when not "") as
// Requeue does one, and returns how many.
func (o *Ops) RequeueParked(ctx context.Context, eventType string) (int, error) {
	if len(eventType) > 32 {
		return 0, oplist.Invalid("eventType", "event type is %d bytes, at most 32", len(eventType))
	}
	if err := oplist.CheckASCII("eventType", eventType); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := o.store.requeueParked(ctx, o.db, eventType, 1000)
		total += n
		if err != nil || n < 1000 {
			return total, err
		}
	}
}

// RequeueResult is what a requeue of every parked event did (the CLI's
// -json and the API's answer).
type RequeueResult struct {
	Requeued int `json:"requeued"`
}
