package orders_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
)

// letterWorld plants letters in every status (ids ascending in this order).
func letterWorld(t *testing.T, b *testBundle) *orders.DeadLetters {
	t.Helper()
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO order_dead_letter
		(order_no, stage, status, status_reason, last_error, attempts, next_retry_at) VALUES
		('W-1', 'close', 'waiting', '', 'close order W-1: inventory row of sku 5 is missing', 2, NOW(3) + INTERVAL 1 HOUR),
		('P-1', 'close', 'parked', 'parked after 8 failed attempts (maximum 8); see last_error', 'boom', 8, NOW(3) - INTERVAL 1 DAY),
		('R-1', 'close', 'resolved', 'order is paid; nothing to close', 'old', 1, NOW(3) - INTERVAL 2 DAY),
		('W-2', 'close', 'waiting', '', 'close order W-2: coupon 9 is status 2', 1, NOW(3) + INTERVAL 5 MINUTE),
		('W-1', 'payment', 'waiting', '', 'trade close timed out', 1, NOW(3))`)
	require.NoError(t, err)
	return orders.NewDeadLetters(b.db.DB)
}

func TestDeadLettersListGetRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := letterWorld(t, b)

	all, err := d.List(b.ctx, orders.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.Equal(t, "W-1", all[0].OrderNo, "newest first")
	require.Equal(t, "payment", all[0].Stage)

	waiting, err := d.List(b.ctx, orders.DeadLetterFilter{Status: orders.DeadLetterWaiting, Stage: orders.StageClose})
	require.NoError(t, err)
	require.Equal(t, []string{"W-2", "W-1"}, letterNos(waiting))

	page, err := d.List(b.ctx, orders.DeadLetterFilter{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	next, err := d.List(b.ctx, orders.DeadLetterFilter{Limit: 2, BeforeID: page[1].ID})
	require.NoError(t, err)
	require.Equal(t, []string{"R-1", "P-1"}, letterNos(next))

	dl, err := d.Get(b.ctx, "P-1", "")
	require.NoError(t, err)
	require.Equal(t, orders.DeadLetterParked, dl.Status)
	require.Equal(t, 8, dl.Attempts)
	require.Contains(t, dl.StatusReason, "parked after 8")
	dl, err = d.Get(b.ctx, "W-1", "payment")
	require.NoError(t, err)
	require.Equal(t, "trade close timed out", dl.LastError)
	_, err = d.Get(b.ctx, "NOPE", "")
	require.ErrorIs(t, err, orders.ErrDeadLetterNotFound)

	// Requeue: parked → waiting, due now; attempts and the error kept.
	now := b.dbNow(t)
	dl, err = d.Requeue(b.ctx, "P-1", "close")
	require.NoError(t, err)
	require.Equal(t, orders.DeadLetterWaiting, dl.Status)
	require.Equal(t, 8, dl.Attempts)
	require.Equal(t, "boom", dl.LastError)
	require.Empty(t, dl.StatusReason)
	require.WithinDuration(t, now, dl.NextRetryAt, 5*time.Second)
	// A waiting letter due later is brought forward; twice is harmless.
	for range 2 {
		dl, err = d.Requeue(b.ctx, "W-1", "")
		require.NoError(t, err)
		require.Equal(t, orders.DeadLetterWaiting, dl.Status)
		require.WithinDuration(t, now, dl.NextRetryAt, 5*time.Second)
	}
	dl, err = d.Requeue(b.ctx, "R-1", "")
	require.ErrorIs(t, err, orders.ErrDeadLetterResolved)
	require.Equal(t, "R-1", dl.OrderNo, "the conflict shows the letter")
	require.Equal(t, orders.DeadLetterResolved, b.letters(t)["R-1"].Status)
	_, err = d.Requeue(b.ctx, "NOPE", "")
	require.ErrorIs(t, err, orders.ErrDeadLetterNotFound)

	// Bad input says which field.
	for _, f := range []orders.DeadLetterFilter{{Status: "lost"}, {Limit: 1001}, {Limit: -1}, {BeforeID: -1}, {Stage: strings.Repeat("s", 33)}} {
		_, err := d.List(b.ctx, f)
		var inv *orders.InvalidInputError
		require.True(t, errors.As(err, &inv), "%+v: %v", f, err)
	}
	_, err = d.Get(b.ctx, strings.Repeat("x", 65), "")
	var inv *orders.InvalidInputError
	require.True(t, errors.As(err, &inv))
	require.Equal(t, "orderNo", inv.Field)
	_, err = d.Requeue(b.ctx, "", "")
	require.True(t, errors.As(err, &inv))
}

func letterNos(dls []orders.DeadLetter) []string {
	out := make([]string, len(dls))
	for i, d := range dls {
		out[i] = d.OrderNo
	}
	return out
}

// The letter's JSON: camelCase keys, times without a zone (they are the
// session's wall clock), and it reads back.
func TestDeadLetterJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 30, 0, 123e6, time.UTC)
	dl := orders.DeadLetter{ID: 3, OrderNo: "A-1", Stage: "close", Status: "parked", StatusReason: "why",
		LastError: "boom", Attempts: 8, NextRetryAt: at, CreatedAt: at, UpdatedAt: at}
	b, err := json.Marshal(dl)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":3,"orderNo":"A-1","stage":"close","status":"parked","statusReason":"why","lastError":"boom",
		"attempts":8,"nextRetryAt":"2026-11-30T10:30:00.123","createdAt":"2026-11-30T10:30:00.123","updatedAt":"2026-11-30T10:30:00.123"}`, string(b))
	var back orders.DeadLetter
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, dl, back)
}

// The HTTP API over the same letters: list with filters and paging, one
// letter, requeue, and the error answers.
func TestDeadLetterAPI(t *testing.T) {
	t.Parallel()
	srv := letterServer(t)
	call := func(method, path string) (int, map[string]any) {
		t.Helper()
		return callJSON(t, method, srv.URL+path)
	}

	code, m := call("GET", "/api/dead-letters?status=waiting&stage=close")
	require.Equal(t, http.StatusOK, code)
	list := m["deadLetters"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "W-2", list[0].(map[string]any)["orderNo"])
	require.EqualValues(t, 0, m["nextBefore"])

	code, m = call("GET", "/api/dead-letters?limit=2")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, m["deadLetters"].([]any), 2)
	require.NotZero(t, m["nextBefore"])

	code, m = call("GET", "/api/dead-letters/P-1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "parked", m["status"])
	require.EqualValues(t, 8, m["attempts"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$`, m["nextRetryAt"])

	code, m = call("GET", "/api/dead-letters/W-1?stage=payment")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "payment", m["stage"])

	code, m = call("POST", "/api/dead-letters/P-1/requeue")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "waiting", m["status"])

	code, m = call("POST", "/api/dead-letters/R-1/requeue")
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, m["error"], "resolved")
	require.Equal(t, "resolved", m["deadLetter"].(map[string]any)["status"])

	for _, tc := range []struct {
		method, path string
		code         int
		field, msg   string
	}{
		{"GET", "/api/dead-letters/NOPE", 404, "orderNo", `no close dead letter for order "NOPE"`},
		{"POST", "/api/dead-letters/NOPE/requeue?stage=payment", 404, "orderNo", `no payment dead letter for order "NOPE"`},
		{"GET", "/api/dead-letters?status=lost", 400, "status", `status "lost" is not waiting, parked or resolved`},
		{"GET", "/api/dead-letters?limit=0", 400, "limit", `limit "0" is not a positive integer`},
		{"GET", "/api/dead-letters?limit=5000", 400, "limit", "limit 5000 is not in 1..1000"},
		{"GET", "/api/dead-letters?before=x", 400, "before", `before "x" is not a non-negative integer`},
		{"GET", "/api/dead-letters?stauts=waiting", 400, "stauts", `unknown query parameter "stauts"`},
		{"GET", "/api/dead-letters/P-1?x=1", 400, "x", `unknown query parameter "x"`},
		{"GET", "/api/dead-letters/" + strings.Repeat("x", 65), 400, "orderNo", "order number must be 1-64 bytes"},
	} {
		code, m := call(tc.method, tc.path)
		require.Equal(t, tc.code, code, tc.path)
		require.Equal(t, tc.field, m["field"], tc.path)
		require.Contains(t, m["error"], tc.msg, tc.path)
	}
}

// callJSON makes an HTTP request and decodes the JSON object it answers.
func callJSON(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return res.StatusCode, m
}

// letterServer serves the dead-letter API over letterWorld's letters.
func letterServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(orders.NewDeadLetterAPI(letterWorld(t, setup(t)), nil).Handler())
	t.Cleanup(srv.Close)
	return srv
}
