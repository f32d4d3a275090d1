package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// opsServer serves the outbox and refund APIs over a database with parked
// and pending outbox events and refunds owed.
func opsServer(t *testing.T) (*httptest.Server, *dbtest.DB) {
	t.Helper()
	db := dbtest.New(t)
	for _, stmt := range []string{
		`INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, attempts, next_attempt_at, last_error, park_reason, parked_at, created_at) VALUES
			('stock.release', 'O-1', '{}', 't1', 'parked', 1, UTC_TIMESTAMP(3), 'status 410', 'permanent answer: status 410', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)),
			('coupon.restore', 'O-1', '{}', 't2', 'parked', 1, UTC_TIMESTAMP(3), 'status 400', 'permanent answer: status 400', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)),
			('stock.release', 'O-2', '{}', 't3', 'pending', 0, UTC_TIMESTAMP(3), '', '', NULL, UTC_TIMESTAMP(3))`,
		`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason) VALUES
			('wx-c', 'R-1', 20.00, NOW(3), 'late'), ('unp-d', 'R-1', 19.50, NOW(3), 'late'), ('ali-b', 'R-2', 20.00, NOW(3), 'duplicate')`,
	} {
		_, err := db.ExecContext(context.Background(), stmt)
		require.NoError(t, err, stmt)
	}
	s := New(Config{})
	s.MountOutbox(HomeOnly(outbox.NewOps(db.DB)))
	s.MountRefunds(HomeOnly(refunds.New(db.DB)))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, db
}

// sourcedOpsServer serves the outbox and refund APIs over two order
// databases: source a on mysql.dsn's, with opsServer's rows (2 parked
// events, 1 pending; 3 refunds owed), and source b another, seeded with
// stmt.
func sourcedOpsServer(t *testing.T, stmt string) (srv *httptest.Server, home, other *dbtest.DB) {
	t.Helper()
	_, home = opsServer(t)
	other = dbtest.New(t)
	_, err := other.ExecContext(context.Background(), stmt)
	require.NoError(t, err)
	s := New(Config{})
	homeOutbox, homeRefunds := outbox.NewOps(home.DB), refunds.New(home.DB)
	s.MountOutbox(Sourced[*outbox.Ops]{Home: homeOutbox, By: map[string]*outbox.Ops{"a": homeOutbox, "b": outbox.NewOps(other.DB)}})
	s.MountRefunds(Sourced[*refunds.Ops]{Home: homeRefunds, By: map[string]*refunds.Ops{"a": homeRefunds, "b": refunds.New(other.DB)}})
	srv = httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, home, other
}

func callOps(t *testing.T, srv *httptest.Server, method, path, body string, want int, v any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, want, resp.StatusCode, path)
	if v != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	}
}

// The outbox view over HTTP: the parked list, an event, the stats, and
// requeues, with 404 and 409 where they apply.
func TestOutboxAPI(t *testing.T) {
	t.Parallel()
	srv, _ := opsServer(t)
	call := func(method, path string, want int, v any) { t.Helper(); callOps(t, srv, method, path, "", want, v) }
	var l outbox.List
	call("GET", "/api/outbox/events?status=parked", 200, &l)
	require.Len(t, l.Events, 2)
	for _, e := range l.Events {
		require.True(t, strings.HasPrefix(e.ParkReason, "permanent answer: status 4"), e.ParkReason)
	}
	var s outbox.Stats
	call("GET", "/api/outbox/stats", 200, &s)
	require.Equal(t, 2, s.Parked)
	id := strconv.FormatInt(l.Events[0].ID, 10)
	var e outbox.Event
	call("POST", "/api/outbox/events/"+id+"/requeue", 200, &e)
	require.Equal(t, "pending", e.Status)
	var conflict struct {
		Error   string       `json:"error"`
		Subject outbox.Event `json:"subject"`
	}
	call("POST", "/api/outbox/events/"+id+"/requeue", 409, &conflict)
	require.Equal(t, l.Events[0].ID, conflict.Subject.ID)
	call("GET", "/api/outbox/events/99999999", 404, nil)
	call("GET", "/api/outbox/events/x", 400, nil)
	call("GET", "/api/outbox/events?status=lost", 400, nil)
	call("GET", "/api/outbox/events?colour=blue", 400, nil)
	var res outbox.RequeueResult
	call("POST", "/api/outbox/requeue", 200, &res)
	require.Equal(t, 1, res.Requeued)
}

// refundSummary and refundList are what the refund tests read of
// /api/refunds/summary and /api/refunds.
type refundSummary struct {
	Count  int    `json:"count"`
	Amount string `json:"amount"`
}

type refundList struct {
	Conflicts []struct {
		PaymentID string `json:"paymentId"`
	} `json:"conflicts"`
}

// The refunds view over HTTP: the summary, the list, one, and recording a
// refund (with who: "api" unless the body says).
func TestRefundAPI(t *testing.T) {
	t.Parallel()
	srv, _ := opsServer(t)
	call := func(method, path, body string, want int, v any) {
		t.Helper()
		callOps(t, srv, method, path, body, want, v)
	}
	var summary refundSummary
	call("GET", "/api/refunds/summary", "", 200, &summary)
	require.Equal(t, 3, summary.Count)
	require.Equal(t, "59.50", summary.Amount)
	var list refundList
	call("GET", "/api/refunds?status=owed", "", 200, &list)
	require.Len(t, list.Conflicts, 3)
	var p struct {
		RefundStatus string `json:"refundStatus"`
		RefundedBy   string `json:"refundedBy"`
		RefundNote   string `json:"refundNote"`
	}
	call("POST", "/api/refunds/ali-b/refunded", `{"note":"refund 9002"}`, 200, &p)
	require.Equal(t, "refunded", p.RefundStatus)
	require.Equal(t, "api", p.RefundedBy)
	// Who records it is the caller, not the body.
	call("POST", "/api/refunds/wx-c/refunded", `{"note":"refund 9003","by":"finance-bot"}`, 400, nil)
	call("POST", "/api/refunds/ali-b/refunded", `{}`, 409, nil)
	call("POST", "/api/refunds/zzz/refunded", ``, 404, nil)
	call("POST", "/api/refunds/unp-d/refunded", `{"colour":"blue"}`, 400, nil)
	call("GET", "/api/refunds?status=lost", "", 400, nil)
	call("GET", "/api/refunds/unp-d", "", 200, nil)
}

// ?source= picks the order database an outbox route reads and changes:
// without it mysql.dsn's, an unknown name is a 400 listing the sources.
func TestOutboxAPISource(t *testing.T) {
	t.Parallel()
	srv, _, _ := sourcedOpsServer(t, `INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, attempts, next_attempt_at, last_error, park_reason, parked_at, created_at) VALUES
		('stock.release', 'B-1', '{}', 't9', 'parked', 3, UTC_TIMESTAMP(3), 'status 404', 'permanent answer: status 404', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`)
	call := func(method, path string, want int, v any) { t.Helper(); callOps(t, srv, method, path, "", want, v) }

	var st outbox.Stats
	call("GET", "/api/outbox/stats", 200, &st)
	require.Equal(t, outbox.Stats{Pending: 1, OldestPendingAgeSeconds: st.OldestPendingAgeSeconds, Parked: 2}, st)
	call("GET", "/api/outbox/stats?source=a", 200, &st)
	require.Equal(t, 2, st.Parked, "a is on mysql.dsn's database")
	call("GET", "/api/outbox/stats?source=b", 200, &st)
	require.Equal(t, outbox.Stats{Parked: 1}, st)
	var l outbox.List
	call("GET", "/api/outbox/events?status=parked&source=b", 200, &l)
	require.Len(t, l.Events, 1)
	require.Equal(t, "B-1", l.Events[0].OrderNo)
	id := strconv.FormatInt(l.Events[0].ID, 10)
	var e outbox.Event
	call("GET", "/api/outbox/events/"+id+"?source=b", 200, &e)
	require.Equal(t, "B-1", e.OrderNo)
	call("POST", "/api/outbox/events/"+id+"/requeue?source=b", 200, &e)
	require.Equal(t, "pending", e.Status)
	var res outbox.RequeueResult
	call("POST", "/api/outbox/requeue?source=b", 200, &res)
	require.Zero(t, res.Requeued, "b has no parked event left; home's are untouched")
	call("GET", "/api/outbox/stats", 200, &st)
	require.Equal(t, 2, st.Parked)

	var bad struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	call("GET", "/api/outbox/stats?source=c", 400, &bad)
	require.Equal(t, "source", bad.Field)
	require.Equal(t, `source "c" is not an order source (the sources: a, b)`, bad.Error)
	call("POST", "/api/outbox/requeue?source=c", 400, nil)
	call("GET", "/api/outbox/events/"+id+"?source=c", 400, nil)
}

// ?source= picks the order database a refund route reads and changes:
// without it mysql.dsn's, an unknown name is a 400 listing the sources.
func TestRefundAPISource(t *testing.T) {
	t.Parallel()
	srv, home, other := sourcedOpsServer(t, `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason)
		VALUES ('ali-z', 'B-1', 5.00, NOW(3), 'late')`)
	call := func(method, path, body string, want int, v any) {
		t.Helper()
		callOps(t, srv, method, path, body, want, v)
	}
	refundStatus := func(db *dbtest.DB, paymentID string) string {
		t.Helper()
		var st string
		require.NoError(t, db.GetContext(context.Background(), &st, `SELECT refund_status FROM payment_conflict WHERE payment_id = ?`, paymentID))
		return st
	}

	var summary refundSummary
	call("GET", "/api/refunds/summary?source=b", "", 200, &summary)
	require.Equal(t, 1, summary.Count)
	require.Equal(t, "5.00", summary.Amount)
	call("GET", "/api/refunds/summary?source=a", "", 200, &summary)
	require.Equal(t, 3, summary.Count, "a is on mysql.dsn's database")
	var list refundList
	call("GET", "/api/refunds?status=owed&source=b", "", 200, &list)
	require.Len(t, list.Conflicts, 1)
	require.Equal(t, "ali-z", list.Conflicts[0].PaymentID)

	call("GET", "/api/refunds/ali-z", "", 404, nil)
	call("GET", "/api/refunds/ali-z?source=b", "", 200, nil)
	call("POST", "/api/refunds/wx-c/refunded?source=b", `{"note":"refund 9004"}`, 404, nil)
	var p struct {
		RefundStatus string `json:"refundStatus"`
	}
	call("POST", "/api/refunds/ali-z/refunded?source=b", `{"note":"refund 9005"}`, 200, &p)
	require.Equal(t, "refunded", p.RefundStatus)
	require.Equal(t, "refunded", refundStatus(other, "ali-z"))
	for _, id := range []string{"wx-c", "unp-d", "ali-b"} {
		require.Equal(t, "owed", refundStatus(home, id), id)
	}

	var bad struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/refunds?source=c"},
		{"GET", "/api/refunds/summary?source=c"},
		{"GET", "/api/refunds/ali-z?source=c"},
		{"POST", "/api/refunds/wx-c/refunded?source=c"},
	} {
		call(tc.method, tc.path, "", 400, &bad)
		require.Equal(t, "source", bad.Field, tc.path)
		require.Equal(t, `source "c" is not an order source (the sources: a, b)`, bad.Error, tc.path)
	}
	require.Equal(t, "owed", refundStatus(home, "wx-c"))
}

// FuzzExactMembers holds exactMembers' walk over the bytes to a Decoder's
// reading of the same body member by member, for every body readBody and
// decodeRegistration pass to it: one JSON value with nothing after it.
func FuzzExactMembers(f *testing.F) {
	for _, s := range []string{
		`{"bizUuid":"a","handler":"h","delayMs":5,"payload":{"x":[1,"}",{"y":"\""}]},"maxRetry":3}`,
		`{"bizUuid":"a","BizUuid":"b"}`, `{"handler":"h","handler":"h"}`, `{"biz\u0055uid":"a","bizUuid":"b"}`,
		`{"payload":"\\","note":1}`, `{"payload":"\"","note":1}`, "{\"\xff\":1}", `{ "delayMs" : 1 , "payload" : [ ] }`, `null`, `[{"x":1}]`, `{}`, `"s"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dec := json.NewDecoder(bytes.NewReader(body))
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return
		}
		field, err := exactMembers(body, registrationFields...)
		wantField, wantErr := decoderMembers(body, registrationFields)
		if field != wantField || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: %q, %v; want %q, %v", body, field, err, wantField, wantErr)
		}
	})
}

// decoderMembers is exactMembers by a Decoder's tokens.
func decoderMembers(body []byte, fields []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, _ := dec.Token(); t != json.Delim('{') {
		return "", nil
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		t, _ := dec.Token()
		name, _ := t.(string)
		switch {
		case !slices.Contains(fields, name):
			return "", fmt.Errorf("unknown field %q (fields: %s)", name, strings.Join(fields, ", "))
		case seen[name]:
			return name, fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		_ = dec.Decode(&skip) // on an error More reports false
	}
	return "", nil
}
