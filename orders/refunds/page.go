package refunds

import (
	"context"

	"github.com/orderjob/executor/orders/oplist"
)

// The operator console's page over payment_conflict: like
// deadletters.Ops.Page, it reads a bounded window of index entries in
// keyset order (Ops.List, which the CLI and the JSON API page by id, stays
// as it is).

// Query selects a page of payment conflicts.
type Query struct {
	// Status: Owed, Done or "" for all (then newest id first; with a
	// status, newest first over idx_refund_status_created).
	Status string
	// OrderNo lists that order's conflicts (through idx_order_no); the
	// page is then the whole list.
	OrderNo string
	After   oplist.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// Page is one page of conflicts.
type Page struct {
	Conflicts []Conflict
	Next      oplist.Cursor
}

// Page returns one page of conflicts (see Query).
func (r *Ops) Page(ctx context.Context, q Query) (Page, error) {
	var p Page
	if err := oplist.CheckStatus(q.Status, Owed, Done); err != nil {
		return p, err
	}
	c, err := conflictList.Page(ctx, r.db, oplist.PageQuery[Conflict]{Status: q.Status, OrderNo: q.OrderNo,
		Keep:  func(c Conflict) bool { return q.Status == "" || c.RefundStatus == q.Status },
		After: q.After, Limit: q.Limit})
	p.Conflicts, p.Next = c.Rows, c.Next
	return p, err
}
