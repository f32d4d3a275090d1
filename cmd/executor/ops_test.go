package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

func TestRefundsCLI(t *testing.T) {
	db, env := deadLetterWorld(t)
	_, err := db.Exec(`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, reason, channel, paid_at, created_at) VALUES
		('legacy:A-1', 'A-1', 30.00, 'late', '', NOW(3), NOW(3) - INTERVAL 3 HOUR),
		('wx-2', 'A-1', 12.50, 'late', 'wechat', NOW(3), NOW(3)),
		('ali-3', 'B-2', 7.25, 'duplicate', 'alipay', NOW(3), NOW(3))`)
	require.NoError(t, err)

	code, out, errOut := runCLI(t, env, "refunds", "owed")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `refunds owed\s+3`, out)
	require.Regexp(t, `amount owed\s+49.75`, out)
	require.Regexp(t, `oldest owed\s+\S+ \S+ \(3h0m0s ago\)`, out)

	code, out, errOut = runCLI(t, env, "refunds", "list")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^\d+\s+ali-3\s+B-2\s+7.25\s+duplicate\s+alipay\s+owed`, lines[1], "newest first")

	code, out, errOut = runCLI(t, env, "refunds", "mark-refunded", "wx-2", "-note", "refund R-77", "-json")
	require.Equal(t, 0, code, errOut)
	var p refunds.Conflict
	require.NoError(t, json.Unmarshal([]byte(out), &struct {
		PaymentID    *string `json:"paymentId"`
		RefundStatus *string `json:"refundStatus"`
		RefundNote   *string `json:"refundNote"`
	}{&p.PaymentID, &p.RefundStatus, &p.RefundNote}))
	require.Equal(t, refunds.Conflict{PaymentID: "wx-2", RefundStatus: "refunded", RefundNote: "refund R-77"}, p)
	code, out, errOut = runCLI(t, env, "refunds", "mark-refunded", "wx-2")
	require.Equal(t, 1, code)
	require.Regexp(t, `refundStatus\s+refunded`, out)
	require.Contains(t, errOut, "the refund was already recorded")
	code, _, errOut = runCLI(t, env, "refunds", "show", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no payment conflict with payment id "nope"`)

	code, out, errOut = runCLI(t, env, "refunds", "list", "-status", "owed", "-json")
	require.Equal(t, 0, code, errOut)
	var l struct {
		Conflicts []json.RawMessage `json:"conflicts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &l))
	require.Len(t, l.Conflicts, 2)
	code, _, errOut = runCLI(t, env, "refunds", "list", "-status", "lost")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `status "lost" is not owed or refunded`)
}

func TestOutboxCLI(t *testing.T) {
	db, env := deadLetterWorld(t)
	outboxRows(t, db)

	code, out, errOut := runCLI(t, env, "outbox", "stats")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `pending\s+1`, out)
	require.Regexp(t, `parked\s+2`, out)

	code, out, errOut = runCLI(t, env, "outbox", "list", "-status", "parked")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `O-3\s+coupon.restore\s+parked\s+20\s+.*20 attempts failed \(outbox.maxAttempts\): POST`, lines[1])
	require.Regexp(t, `O-2\s+stock.release\s+parked\s+1\s+.*permanent answer: status 404`, lines[2])

	var ids []int64
	require.NoError(t, db.Select(&ids, `SELECT id FROM order_outbox WHERE status = 'parked' ORDER BY id`))
	code, out, errOut = runCLI(t, env, "outbox", "requeue", itoa64(ids[0]), "-json")
	require.Equal(t, 0, code, errOut)
	var e outbox.Event
	require.NoError(t, json.Unmarshal([]byte(out), &e))
	require.Equal(t, outbox.Pending, e.Status)
	require.Zero(t, e.Attempts)
	code, out, errOut = runCLI(t, env, "outbox", "requeue", itoa64(ids[0]))
	require.Equal(t, 1, code)
	require.Regexp(t, `status\s+pending`, out)
	require.Contains(t, errOut, "outbox event is not parked")
	code, out, errOut = runCLI(t, env, "outbox", "requeue", "-all")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "requeued 1 parked event(s)\n", out)
	code, _, errOut = runCLI(t, env, "outbox", "requeue")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "want exactly one ID, or -all")
	code, _, errOut = runCLI(t, env, "outbox", "show", "999999")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no outbox event 999999")
}

// outboxRows writes one pending and two parked events.
// In outbox mode with order.sources, -source reads and requeues the
// outbox of one source's database; without it, mysql.dsn's.
func TestOutboxCLISource(t *testing.T) {
	_, env := deadLetterWorld(t)
	other := dbtest.New(t)
	outboxRows(t, other)
	env["ORDER_COMPENSATION_MODE"] = "outbox"
	env["ORDER_COMPENSATION_INVENTORY_URL"], env["ORDER_COMPENSATION_COUPON_URL"] = "http://inv.local/r", "http://cpn.local/r"
	env["ORDER_SOURCES"] = fmt.Sprintf(`[{name: b, dsn: %q, tables: order_info}]`, other.DSN)

	code, out, errOut := runCLI(t, env, "outbox", "stats")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `pending\s+0`, out, "mysql.dsn's database")
	code, out, errOut = runCLI(t, env, "outbox", "stats", "-source", "b")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `pending\s+1`, out)
	require.Regexp(t, `parked\s+2`, out)
	code, out, errOut = runCLI(t, env, "outbox", "requeue", "-all", "-source", "b")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "requeued 2 parked event(s)")
	code, _, errOut = runCLI(t, env, "outbox", "list", "-source", "c")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `-source "c" is not an order source (the sources: b)`)
}

func outboxRows(t *testing.T, db *dbtest.DB) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, attempts, next_attempt_at,
		last_error, park_reason, parked_at, created_at) VALUES
		('stock.release', 'O-1', '{}', 't1', 'pending', 0, UTC_TIMESTAMP(3), '', '', NULL, UTC_TIMESTAMP(3)),
		('stock.release', 'O-2', '{}', 't2', 'parked', 1, UTC_TIMESTAMP(3), 'POST http://inv/x: status 404: no such sku', 'permanent answer: status 404', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)),
		('coupon.restore', 'O-3', '{}', 't3', 'parked', 20, UTC_TIMESTAMP(3), 'POST http://cpn/x: status 503: down', '20 attempts failed (outbox.maxAttempts)', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`)
	require.NoError(t, err)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
