package orders

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the SQL of the console's outbox page (ops_page.go):
// search windows of keys in keyset order, then the rows of a page by
// primary key, and one order's rows. No locks.

// outboxWindowByIDSQL: newest id first from the cursor. Primary key
// backwards.
const outboxWindowByIDSQL = `
SELECT id, next_attempt_at AS at, (:filter = '' OR event_type = :filter) AS hit
FROM order_outbox FORCE INDEX (PRIMARY)
WHERE id < :before_id
ORDER BY id DESC
LIMIT :window`

// outboxWindowByStatusSQL: one status, latest next_attempt_at first from
// the cursor. idx_status_next (status, next_attempt_at, id) backwards.
const outboxWindowByStatusSQL = `
SELECT id, next_attempt_at AS at, (:filter = '' OR event_type = :filter) AS hit
FROM order_outbox FORCE INDEX (idx_status_next)
WHERE status = :status AND (next_attempt_at < :before_at OR (next_attempt_at = :before_at AND id < :before_id))
ORDER BY next_attempt_at DESC, id DESC
LIMIT :window`

func (store) outboxWindow(ctx context.Context, q sqlx.QueryerContext, f OutboxQuery, window int) ([]oplist.WindowKey, error) {
	var keys []oplist.WindowKey
	var err error
	p := oplist.WindowParams{Filter: f.EventType, Window: window}
	if f.Status == "" {
		p.BeforeID = f.After.BeforeID()
		err = sqlexec.SelectNamed(ctx, q, &keys, outboxWindowByIDSQL, p)
	} else {
		p.Status = f.Status
		p.BeforeAt, p.BeforeID = f.After.Before(sqlexec.Latest)
		err = sqlexec.SelectNamed(ctx, q, &keys, outboxWindowByStatusSQL, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list outbox events: %w", err)
	}
	return keys, nil
}

// outboxByIDSQL reads listed events (literal id list) by primary key.
const outboxByIDSQL = `SELECT ` + outboxColumns + ` FROM order_outbox FORCE INDEX (PRIMARY) WHERE id IN (%s)`

func (store) outboxByID(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]OutboxEvent, error) {
	evs := []OutboxEvent{}
	if len(ids) == 0 {
		return evs, nil
	}
	if err := sqlx.SelectContext(ctx, q, &evs, fmt.Sprintf(outboxByIDSQL, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("read %d outbox events: %w", len(ids), err)
	}
	return evs, nil
}

// outboxOfOrderSQL reads one order's events (one per event type), by
// order number, through uk_order_event.
const outboxOfOrderSQL = `SELECT ` + outboxColumns + ` FROM order_outbox FORCE INDEX (uk_order_event)
WHERE order_no = ? ORDER BY id DESC`

func (store) outboxOfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]OutboxEvent, error) {
	evs := []OutboxEvent{}
	if err := sqlx.SelectContext(ctx, q, &evs, outboxOfOrderSQL, orderNo); err != nil {
		return nil, fmt.Errorf("read outbox events of %s: %w", orderNo, err)
	}
	return evs, nil
}
