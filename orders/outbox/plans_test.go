package outbox

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/plantest"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// TestHotStatementPlans runs every statement of the package through
// plantest.Check (see orders' TestHotStatementPlans): with the statistics as
// the load left them and with statistics that lie, each must keep its plan
// and read at most about 3 rows or index entries per event it handles.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	q := plantest.Q
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	uses := plantest.Uses
	insert, insertArgs := outboxInsert(f.newRows)

	plantest.Check(t, f.db.DB, []string{"order_outbox"}, []plantest.Statement{
		// The close transaction's insert.
		{Name: "close: outbox events", Query: q(insert, insertArgs...), Units: len(f.newRows)},
		// The relay.
		{Name: "relay: pick due events", Query: q(lockDueEventsSQL, 100), Units: 100, Plan: uses("order_outbox", "idx_status_next", "range")},
		{Name: "relay: claim events", Query: named(fmt.Sprintf(claimEventsSQL, sqlexec.IntList(f.events)), map[string]any{"claim_id": 7, "ttl_us": 30e6}), Units: len(f.events), Plan: plantest.PK("order_outbox")},
		{Name: "relay: delivered", Query: named(markDeliveredSQL, eventParams{ID: f.events[0]}), Units: 1, Plan: plantest.PK("order_outbox")},
		{Name: "relay: failed", Query: named(markFailedSQL, eventParams{ID: f.events[0], LastError: "boom", DelayUS: 1e6}), Units: 1, Plan: plantest.PK("order_outbox")},
		{Name: "relay: parked", Query: named(markParkedSQL, eventParams{ID: f.events[0], LastError: "status 404", ParkReason: "permanent answer: status 404"}), Units: 1, Plan: plantest.PK("order_outbox")},
		{Name: "relay: parked count", Query: q(outboxParkedSQL), Units: max(f.parkedEvents, 1), Plan: uses("order_outbox", "idx_status_next", "range", "ref")},
		{Name: "relay: release", Query: named(fmt.Sprintf(releaseEventsSQL, sqlexec.IntList(f.events)), eventParams{ClaimID: 7}), Units: len(f.events), Plan: plantest.PK("order_outbox")},
		{Name: "relay: purge delivered", Query: named(purgeDeliveredSQL, map[string]any{"retention_us": 0, "limit": 1000}), Units: 1000, Plan: uses("order_outbox", "idx_status_next", "range")},
		{Name: "relay: backlog", Query: q(outboxBacklogSQL), Units: f.pendingEvents, Plan: uses("order_outbox", "idx_status_next", "range", "ref").And("o", "PRIMARY", "eq_ref", "const").And("<derived2>", "", "ALL", "system")},
		// The operators' view and the console's page.
		{Name: "operator: outbox event", Query: q(outboxEventSQL, f.events[0]), Units: 1, Plan: plantest.PK("order_outbox")},
		{Name: "operator: requeue event", Query: q(requeueOutboxSQL, f.events[0]), Units: 1, Plan: plantest.PK("order_outbox")},
		{Name: "operator: requeue parked", Query: named(requeueParkedSQL, map[string]any{"event_type": "", "limit": 1000}), Units: max(f.parkedEvents, 1), Plan: uses("order_outbox", "idx_status_next", "range", "ref")},
		{Name: "outbox: newest page", Query: named(outboxWindowByIDSQL, oplist.WindowParams{BeforeID: math.MaxInt64, Window: 51}), Units: 51, Plan: plantest.PK("order_outbox")},
		{Name: "outbox: event type window", Query: named(outboxWindowByIDSQL, oplist.WindowParams{Filter: "coupon.restore", BeforeID: math.MaxInt64, Window: oplist.SearchWindow}), Units: oplist.SearchWindow, Plan: plantest.PK("order_outbox")},
		{Name: "outbox: parked page", Query: named(outboxWindowByStatusSQL, oplist.WindowParams{Status: Parked, BeforeAt: sqlexec.Latest, BeforeID: math.MaxInt64, Window: 51}), Units: 51, Plan: uses("order_outbox", "idx_status_next", "range")},
		{Name: "outbox: done window", Query: named(outboxWindowByStatusSQL, oplist.WindowParams{Filter: "x", Status: Done, BeforeAt: sqlexec.Latest, BeforeID: math.MaxInt64, Window: oplist.SearchWindow}), Units: oplist.SearchWindow, Plan: uses("order_outbox", "idx_status_next", "range")},
		{Name: "outbox: page rows", Query: plantest.Lit(outboxByIDSQL, f.events[:50]), Units: 50, Plan: plantest.PK("order_outbox")},
		{Name: "outbox: of one order", Query: q(outboxOfOrderSQL, f.eventOrderNo), Units: 2, Plan: plantest.ByKey("order_outbox", "uk_order_event")},
	})
}

// planFixture is an order_outbox where delivered events pile up, with some
// pending and due and a few parked, as a shop's is after a while; and a
// page of events for the close's insert.
type planFixture struct {
	db            *dbtest.DB
	newRows       []Row   // a page's events, not yet written
	events        []int64 // pending events
	pendingEvents int
	parkedEvents  int
	eventOrderNo  string // an order with events
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	for _, stmt := range []string{
		// Delivered events pile up; some pending and due.
		`INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, next_attempt_at, created_at)
			SELECT 'stock.release', CONCAT('DEMO', seq), '{}', CONCAT('t', seq), IF(seq % 20 = 0, 'pending', 'done'),
			       UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE, UTC_TIMESTAMP(3)
			FROM seq_1_to_20000 WHERE seq % 3 = 0`,
		`UPDATE order_outbox SET status = 'parked', park_reason = 'permanent answer: status 404', parked_at = UTC_TIMESTAMP(3)
			WHERE status = 'done' AND id % 97 = 3`,
	} {
		_, err := db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	for i := range 500 {
		no := fmt.Sprintf("DEMO%d", 3*i+3)
		f.newRows = append(f.newRows, Row{EventType: EventCouponRestore, OrderNo: no, Payload: []byte("{}"), TraceID: "tr-" + no})
	}
	get := func(dst any, query string) {
		t.Helper()
		require.NoError(t, db.GetContext(ctx, dst, query), query)
	}
	require.NoError(t, db.SelectContext(ctx, &f.events, `SELECT id FROM order_outbox WHERE status = 'pending' ORDER BY id LIMIT 100`))
	get(&f.pendingEvents, `SELECT COUNT(*) FROM order_outbox WHERE status = 'pending'`)
	get(&f.parkedEvents, `SELECT COUNT(*) FROM order_outbox WHERE status = 'parked'`)
	get(&f.eventOrderNo, `SELECT order_no FROM order_outbox ORDER BY id LIMIT 1`)
	return f
}
