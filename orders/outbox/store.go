package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// This file holds the package's SQL: the close transaction's inserts, the
// relay's claims and the operators' reads and requeues. order_outbox times are UTC (UTC_TIMESTAMP(3)),
// whatever the session time zone, so relays in differently configured
// sessions agree on what is due.
//
// An event is 'pending' until a relay marks it 'done'. A claim sets claim_id
// and pushes next_attempt_at to the end of the claim, so other relays leave
// the event alone while it is being sent; if the claimer dies, the event is
// due again when its claim runs out. Every write after the claim repeats
// claim_id and status in its WHERE: a relay whose claim has passed to
// another writes nothing.

// insertOutboxSQL, followed by one (event_type, order_no, payload,
// trace_id) row per event (outboxInsert), adds a page's events in the close
// transaction. uk_order_event rejects a
// second event of a type for an order (the transaction then rolls back).
// The events are due at once.
const insertOutboxSQL = `INSERT INTO order_outbox (event_type, order_no, payload, trace_id, next_attempt_at, created_at) VALUES `

// Row is one event for Insert to write.
type Row struct {
	EventType string
	OrderNo   string
	Payload   []byte
	TraceID   string
}

// Insert writes rows, a page's events, in one statement on e: the close
// transaction, so an event exists exactly when its close committed. A
// second event of a type for an order fails (uk_order_event).
func Insert(ctx context.Context, e sqlx.ExecerContext, rows []Row) error {
	return store{}.insert(ctx, e, rows)
}

func (store) insert(ctx context.Context, e sqlx.ExecerContext, rows []Row) error {
	query, args := outboxInsert(rows)
	if _, err := e.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("write %d outbox events: %w", len(rows), err)
	}
	return nil
}

// store runs the package's statements on the database or transaction it is
// given.
type store struct{}

// outboxInsert renders insertOutboxSQL for rows.
func outboxInsert(rows []Row) (string, []any) {
	return sqlexec.Values(insertOutboxSQL, "(?,?,?,?,UTC_TIMESTAMP(3),UTC_TIMESTAMP(3))", rows, func(args []any, r Row) []any {
		return append(args, r.EventType, r.OrderNo, r.Payload, r.TraceID)
	})
}

// claimed is an event as a relay claims it.
type claimed struct {
	ID        int64  `db:"id"`
	EventType string `db:"event_type"`
	OrderNo   string `db:"order_no"`
	Payload   []byte `db:"payload"`
	TraceID   string `db:"trace_id"`
	Attempts  int    `db:"attempts"`
}

// lockDueEventsSQL picks the events to claim, in the claim transaction.
// It walks idx_status_next over pending events due now, oldest
// due first (the index's order: no sort). FOR UPDATE SKIP LOCKED: rows
// another relay is claiming right now are skipped, not waited for; under
// READ COMMITTED no gap locks are taken. Up to limit rows.
const lockDueEventsSQL = `
SELECT id, event_type, order_no, payload, trace_id, attempts
FROM order_outbox FORCE INDEX (idx_status_next)
WHERE status = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(3)
ORDER BY next_attempt_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// claimEventsSQL claims the picked events until the claim's end.
// The ids are a literal list. The rows are locked by lockDueEventsSQL; one
// row changed per id.
const claimEventsSQL = `
UPDATE order_outbox SET claim_id = :claim_id, next_attempt_at = UTC_TIMESTAMP(3) + INTERVAL :ttl_us MICROSECOND
WHERE id IN (%s)`

// claimEvents claims up to limit due events for claimID, for ttl, in one
// short READ COMMITTED transaction.
func (store) claimEvents(ctx context.Context, db *sqlx.DB, claimID int64, ttl time.Duration, limit int) ([]claimed, error) {
	var evs []claimed
	err := sqlexec.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if err := sqlx.SelectContext(ctx, tx, &evs, lockDueEventsSQL, limit); err != nil {
			return fmt.Errorf("pick due outbox events: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		ids := make([]int64, len(evs))
		for i, ev := range evs {
			ids[i] = ev.ID
		}
		if _, err := sqlexec.ExecNamed(ctx, tx, fmt.Sprintf(claimEventsSQL, sqlexec.IntList(ids)),
			map[string]any{"claim_id": claimID, "ttl_us": ttl.Microseconds()}); err != nil {
			return fmt.Errorf("claim %d outbox events: %w", len(ids), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// markDeliveredSQL records an acknowledged event. Fenced by claim_id and
// status; next_attempt_at
// becomes the delivery time, which the purge walks idx_status_next by. One
// row, or none when the claim has passed to another relay.
const markDeliveredSQL = `
UPDATE order_outbox
SET status = 'done', attempts = attempts + 1, delivered_at = UTC_TIMESTAMP(3),
    next_attempt_at = UTC_TIMESTAMP(3), last_error = ''
WHERE id = :id AND claim_id = :claim_id AND status = 'pending'`

// eventParams are the parameters of the statements that end one claimed
// event's attempt.
type eventParams struct {
	ID         int64  `db:"id"`
	ClaimID    int64  `db:"claim_id"`
	LastError  string `db:"last_error"`
	DelayUS    int64  `db:"delay_us"`
	ParkReason string `db:"park_reason"`
}

func (store) markDelivered(ctx context.Context, e sqlx.ExecerContext, id, claimID int64) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, markDeliveredSQL, eventParams{ID: id, ClaimID: claimID})
	if err != nil {
		return false, fmt.Errorf("mark outbox event %d delivered: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// markFailedSQL schedules the retry of an event whose delivery failed.
// Fenced like markDeliveredSQL;
// the claim is given up. One row or none.
const markFailedSQL = `
UPDATE order_outbox
SET attempts = attempts + 1, last_error = :last_error, claim_id = 0,
    next_attempt_at = UTC_TIMESTAMP(3) + INTERVAL :delay_us MICROSECOND
WHERE id = :id AND claim_id = :claim_id AND status = 'pending'`

func (store) markFailed(ctx context.Context, e sqlx.ExecerContext, id, claimID int64, lastErr string, delay time.Duration) error {
	p := eventParams{ID: id, ClaimID: claimID, LastError: lastErr, DelayUS: delay.Microseconds()}
	if _, err := sqlexec.ExecNamed(ctx, e, markFailedSQL, p); err != nil {
		return fmt.Errorf("schedule retry of outbox event %d: %w", id, err)
	}
	return nil
}

// markParkedSQL stops trying an event: the receiver refused it for good, or
// it failed MaxAttempts times. Fenced like markFailedSQL; next_attempt_at becomes the park
// time (idx_status_next then lists parked events in the order they were
// parked). One row or none.
const markParkedSQL = `
UPDATE order_outbox
SET status = 'parked', attempts = attempts + 1, last_error = :last_error, park_reason = :park_reason, claim_id = 0,
    parked_at = UTC_TIMESTAMP(3), next_attempt_at = UTC_TIMESTAMP(3)
WHERE id = :id AND claim_id = :claim_id AND status = 'pending'`

func (store) markParked(ctx context.Context, e sqlx.ExecerContext, id, claimID int64, lastErr, reason string) error {
	p := eventParams{ID: id, ClaimID: claimID, LastError: lastErr, ParkReason: sqlexec.Truncate(reason, 255)}
	if _, err := sqlexec.ExecNamed(ctx, e, markParkedSQL, p); err != nil {
		return fmt.Errorf("park outbox event %d: %w", id, err)
	}
	return nil
}

// releaseEventsSQL gives claimed events that were not sent back, due at
// once (a literal id list). Fenced by claim_id.
const releaseEventsSQL = `
UPDATE order_outbox FORCE INDEX (PRIMARY) SET claim_id = 0, next_attempt_at = UTC_TIMESTAMP(3)
WHERE claim_id = :claim_id AND status = 'pending' AND id IN (%s)`

func (store) releaseEvents(ctx context.Context, e sqlx.ExecerContext, claimID int64, ids []int64) error {
	if _, err := sqlexec.ExecNamed(ctx, e, fmt.Sprintf(releaseEventsSQL, sqlexec.IntList(ids)), eventParams{ClaimID: claimID}); err != nil {
		return fmt.Errorf("release %d outbox events: %w", len(ids), err)
	}
	return nil
}

// purgeDeliveredSQL deletes delivered events older than the retention, a
// chunk at a time. It walks idx_status_next over
// status 'done' (next_attempt_at is the delivery time there).
const purgeDeliveredSQL = `
DELETE FROM order_outbox
WHERE status = 'done' AND next_attempt_at < UTC_TIMESTAMP(3) - INTERVAL :retention_us MICROSECOND
ORDER BY next_attempt_at LIMIT :limit`

func (store) purgeDelivered(ctx context.Context, e sqlx.ExecerContext, retention time.Duration, limit int) (int64, error) {
	res, err := sqlexec.ExecNamed(ctx, e, purgeDeliveredSQL, map[string]any{"retention_us": retention.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("purge delivered outbox events: %w", err)
	}
	return res.RowsAffected()
}

// outboxBacklogSQL counts the events not yet delivered and finds when the
// oldest of them was written, with the database's UTC clock to age it by.
// The count and MIN(id) read only the pending range of
// idx_status_next (named: delivered events pile up in the table; the
// secondary index carries the id), then one primary-key lookup reads the
// first event's created_at: ids grow with the writes, so the lowest pending
// id is the oldest pending event. No locks.
const outboxBacklogSQL = `
SELECT b.n, o.created_at AS oldest, UTC_TIMESTAMP(3) AS now
FROM (SELECT COUNT(*) AS n, MIN(id) AS first_id
      FROM order_outbox FORCE INDEX (idx_status_next) WHERE status = 'pending') b
LEFT JOIN order_outbox o ON o.id = b.first_id`

// outboxParkedSQL counts the parked events over their range of
// idx_status_next. No locks.
const outboxParkedSQL = `SELECT COUNT(*) FROM order_outbox FORCE INDEX (idx_status_next) WHERE status = 'parked'`

func (store) backlog(ctx context.Context, q sqlx.QueryerContext) (Backlog, error) {
	var r struct {
		N      int          `db:"n"`
		Oldest sql.NullTime `db:"oldest"`
		Now    time.Time    `db:"now"`
	}
	if err := sqlx.GetContext(ctx, q, &r, outboxBacklogSQL); err != nil {
		return Backlog{}, fmt.Errorf("count pending outbox events: %w", err)
	}
	b := Backlog{Pending: r.N}
	if r.Oldest.Valid {
		b.OldestAge = max(r.Now.Sub(r.Oldest.Time), 0)
	}
	if err := sqlx.GetContext(ctx, q, &b.Parked, outboxParkedSQL); err != nil {
		return Backlog{}, fmt.Errorf("count parked outbox events: %w", err)
	}
	return b, nil
}

// The operators' statements (ops.go, page.go); not on a hot path.
const outboxColumns = `id, event_type, order_no, payload, trace_id, status, attempts, next_attempt_at, last_error,
	park_reason, parked_at, created_at, delivered_at`

// listOutboxSQL lists events newest first, one page; each filter is ""
// (before id: 0, the first page) for any. No locks.
const listOutboxSQL = `
SELECT ` + outboxColumns + ` FROM order_outbox
WHERE (:status = '' OR status = :status) AND (:event_type = '' OR event_type = :event_type)
  AND (:order_no = '' OR order_no = :order_no) AND (:before_id = 0 OR id < :before_id)
ORDER BY id DESC
LIMIT :limit`

// outboxEventSQL reads one event by its id.
const outboxEventSQL = `SELECT ` + outboxColumns + ` FROM order_outbox WHERE id = ?`

// requeueOutboxSQL gives a parked event back: pending, due now, attempts
// from zero, no claim, by id. One row, or none when not parked.
// requeueParkedSQL does it for up to limit parked events (of one event type
// or, "", all), over their range of idx_status_next.
const (
	requeueOutboxSQL = `
UPDATE order_outbox SET status = 'pending', attempts = 0, claim_id = 0, next_attempt_at = UTC_TIMESTAMP(3),
    park_reason = '', parked_at = NULL
WHERE id = ? AND status = 'parked'`
	requeueParkedSQL = `
UPDATE order_outbox FORCE INDEX (idx_status_next)
SET status = 'pending', attempts = 0, claim_id = 0, next_attempt_at = UTC_TIMESTAMP(3), park_reason = '', parked_at = NULL
WHERE status = 'parked' AND (:event_type = '' OR event_type = :event_type)
ORDER BY next_attempt_at LIMIT :limit`
)

func (store) requeue(ctx context.Context, e sqlx.ExecerContext, id int64) (bool, error) {
	res, err := e.ExecContext(ctx, requeueOutboxSQL, id)
	if err != nil {
		return false, fmt.Errorf("requeue outbox event %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (store) requeueParked(ctx context.Context, e sqlx.ExecerContext, eventType string, limit int) (int, error) {
	res, err := sqlexec.ExecNamed(ctx, e, requeueParkedSQL, map[string]any{"event_type": eventType, "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("requeue parked outbox events: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// The console's page (page.go): a search window of keys in keyset order,
// then the rows of a page by primary key, and one order's rows. No locks.

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

// outboxByIDSQL reads listed events (literal id list) by primary key.
const outboxByIDSQL = `SELECT ` + outboxColumns + ` FROM order_outbox FORCE INDEX (PRIMARY) WHERE id IN (%s)`

// outboxOfOrderSQL reads one order's events (one per event type), by
// order number, through uk_order_event.
const outboxOfOrderSQL = `SELECT ` + outboxColumns + ` FROM order_outbox FORCE INDEX (uk_order_event)
WHERE order_no = ? ORDER BY id DESC`

// eventList reads order_outbox for Ops and OfOrder: one event, the lists
// (by id, and the console's page) and one order's events, on the
// statements above.
var eventList = oplist.Table[Event]{Noun: "outbox events", One: "outbox event",
	GetSQL: outboxEventSQL, ListSQL: listOutboxSQL,
	WindowByIDSQL: outboxWindowByIDSQL, WindowByStatusSQL: outboxWindowByStatusSQL,
	ByIDSQL: outboxByIDSQL, OfOrderSQL: outboxOfOrderSQL, ID: func(e Event) int64 { return e.ID }}

// OfOrder reads the events of the order orderNo (one per event type), newest
// first: the order view shows them.
func OfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]Event, error) {
	return eventList.OfOrder(ctx, q, orderNo)
}
