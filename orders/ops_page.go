package orders

import (
	"context"

	"github.com/orderjob/executor/orders/oplist"
)

// The operator console's page over payment_conflict: like
// deadletters.Ops.Page, it reads a bounded window of index entries in keyset
// order, whatever the filters (Refunds.List, which the CLI and the JSON API
// page by id, stays as it is).

// RefundQuery selects a page of payment conflicts.
type RefundQuery struct {
	// Status: RefundOwed, RefundDone or "" for all (then newest id first;
	// with a status, newest first over idx_refund_status_created).
	Status string
	// OrderNo lists that order's conflicts (through idx_order_no); the
	// page is then the whole list.
	OrderNo string
	After   oplist.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// RefundPage is one page of conflicts.
type RefundPage struct {
	Conflicts []PaymentConflict
	Next      oplist.Cursor
}

// Page returns one page of conflicts (see RefundQuery).
func (r *Refunds) Page(ctx context.Context, q RefundQuery) (RefundPage, error) {
	var p RefundPage
	if q.Status != "" && !validRefundStatus(q.Status) {
		return p, oplist.Invalid("status", "status %q is not owed or refunded", q.Status)
	}
	if len(q.OrderNo) > oplist.MaxOrderNoLen {
		return p, oplist.Invalid("orderNo", "order number must be at most %d bytes", oplist.MaxOrderNoLen)
	}
	if err := oplist.CheckLimit(&q.Limit); err != nil {
		return p, err
	}
	if q.OrderNo != "" {
		cs, err := r.store.conflictsOfOrder(ctx, r.db, q.OrderNo)
		for _, c := range cs {
			if q.Status == "" || c.RefundStatus == q.Status {
				p.Conflicts = append(p.Conflicts, c)
			}
		}
		return p, err
	}
	timed := q.Status != ""
	if err := oplist.CheckCursorKind(q.After, timed); err != nil {
		return p, err
	}
	keys, err := r.store.conflictWindow(ctx, r.db, q, q.Limit+1)
	if err != nil {
		return p, err
	}
	var ids []int64
	ids, p.Next, _, _ = oplist.PickWindow(keys, q.Limit, q.Limit+1, timed)
	if p.Conflicts, err = r.store.conflictsByID(ctx, r.db, ids); err != nil {
		return p, err
	}
	oplist.InOrder(p.Conflicts, ids, func(c PaymentConflict) int64 { return c.ID })
	return p, nil
}
