package outbox

import (
	"context"

	"github.com/orderjob/executor/orders/oplist"
)

// The operator console's page over order_outbox: like deadletters.Ops.Page,
// it reads a bounded window of index entries in keyset order, whatever the
// filters (Ops.List, which the CLI and the JSON API page by id, stays as it
// is).

// Query selects a page of events.
type Query struct {
	// Status: Parked, Pending, Done or "" for all (then
	// newest id first; with a status, latest next attempt first over
	// idx_status_next: for parked events, the most recently parked).
	Status string
	// EventType keeps events of this type (checked on the window's rows).
	EventType string
	// OrderNo lists that order's events (through uk_order_event); the
	// page is then the whole list.
	OrderNo string
	After   oplist.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// Page is one page of events.
type Page struct {
	Events     []Event
	Next       oplist.Cursor
	Examined   int
	WindowFull bool
}

// Page returns one page of events (see Query).
func (o *Ops) Page(ctx context.Context, q Query) (Page, error) {
	var p Page
	if err := oplist.CheckStatus(q.Status, Pending, Parked, Done); err != nil {
		return p, err
	}
	if len(q.EventType) > 32 {
		return p, oplist.Invalid("eventType", "event type is %d bytes, at most 32", len(q.EventType))
	}
	if err := oplist.CheckASCII("eventType", q.EventType); err != nil {
		return p, err
	}
	r, err := eventList.Page(ctx, o.db, oplist.PageQuery[Event]{Status: q.Status, Filter: q.EventType, OrderNo: q.OrderNo,
		Keep: func(e Event) bool {
			return (q.Status == "" || e.Status == q.Status) && (q.EventType == "" || e.EventType == q.EventType)
		},
		After: q.After, Limit: q.Limit})
	p.Events, p.Next, p.Examined, p.WindowFull = r.Rows, r.Next, r.Examined, r.WindowFull
	return p, err
}
