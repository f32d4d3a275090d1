package api

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// Ordinary bad input in filters and paths is a 400 naming the field, never
// a 500 with an ERROR line: non-ASCII text where the column is ASCII
// (MariaDB's "Illegal mix of collations"), a year-0000 since or after that
// no DATETIME holds, and a since in days that overflowed into "is
// negative". Through the real API and console on a real MariaDB.
func TestAPIBadFilterInput(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	s := New(Config{})
	s.MountDelayTasks(w.tasks)
	s.MountOutbox(HomeOnly(outbox.NewOps(w.db.DB)))
	s.MountRefunds(HomeOnly(refunds.New(w.db.DB)))
	s.MountDeadLetters(HomeOnly(letterWorld(t)))
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	const e = "%C3%A9" // é
	for _, tc := range []struct {
		method, path, field, msg string
	}{
		{"GET", "/api/delay-tasks?handler=" + e, "handler", `delay: handler: "é" is not printable ASCII`},
		{"GET", "/api/delay-tasks/" + e, "bizUuid", `delay: bizUuid: "é" is not printable ASCII`},
		{"GET", "/api/delay-tasks/task-" + e, "bizUuid", `delay: bizUuid: "task-é" is not printable ASCII`},
		{"DELETE", "/api/delay-tasks/" + e, "bizUuid", `delay: bizUuid: "é" is not printable ASCII`},
		{"POST", "/api/delay-tasks/" + e + "/requeue", "bizUuid", `delay: bizUuid: "é" is not printable ASCII`},
		{"GET", "/api/outbox/events?eventType=" + e, "eventType", `eventType "é" is not printable ASCII`},
		{"GET", "/api/outbox/events?eventType=stock.release%00", "eventType", `eventType "stock.release\x00" is not printable ASCII`},
		{"POST", "/api/outbox/requeue?eventType=" + e, "eventType", `eventType "é" is not printable ASCII`},
		{"GET", "/api/outbox/events?orderNo=" + strings.Repeat("9", 65), "orderNo", "order number must be at most 64 bytes"},
		{"GET", "/api/outbox/events?eventType=" + strings.Repeat("x", 33), "eventType", "event type must be at most 32 bytes"},
		{"POST", "/api/dead-letters/requeue?since=0000-01-01", "since", "since 0000-01-01 is outside the years 1000-9999"},
		{"POST", "/api/dead-letters/requeue?since=999999999d", "since", `since "999999999d" is more than 36524 days back`},
		{"POST", "/api/dead-letters/requeue?since=2562047h", "since", `since "2562047h" is more than 36524 days back`},
		{"POST", "/api/dead-letters/requeue?since=36525d", "since", `since "36525d" is more than 36524 days back`},
		{"GET", "/api/dead-letters?source=" + e, "source", `source "é" is not an order source (the sources: default)`},
		{"POST", "/api/dead-letters/P-1/requeue?source=%00", "source", `source "\x00" is not an order source`},
		{"GET", "/api/refunds/summary?source=" + e, "source", `source "é" is not an order source (the sources: default)`},
	} {
		req, err := http.NewRequest(tc.method, hs.URL+tc.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		var ans map[string]any
		require.NoError(t, json.Unmarshal(body, &ans), "%s", body)
		require.Equal(t, tc.field, ans["field"], "%s %s", tc.method, tc.path)
		require.Contains(t, ans["error"], tc.msg, "%s %s", tc.method, tc.path)
	}
	// The bounds themselves pass.
	for _, p := range []string{"/api/dead-letters/requeue?status=parked&since=36524d&dryRun=true", "/api/dead-letters/requeue?status=parked&since=1000-01-01&dryRun=true",
		"/api/delay-tasks?handler=orderTimeoutClose", "/api/outbox/events?eventType=stock.release", "/api/outbox/events?orderNo=" + e} {
		method := http.MethodGet
		if strings.Contains(p, "requeue") {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, hs.URL+p, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, body)
	}

	b := w.browser(t)
	b.signIn(aliceToken)
	const y0 = "00000101000000.000~5" // a cursor in the year 0000
	for _, tc := range []struct{ path, msg string }{
		{"/console/tasks?handler=" + e, `"é" is not printable ASCII`},
		{"/console/tasks?bizUuid=" + e, `"é" is not printable ASCII`},
		{"/console/tasks?traceId=" + e, `"é" is not printable ASCII`},
		{"/console/tasks/" + e, `"é" is not printable ASCII`},
		{"/console/outbox?eventType=" + e, `eventType "é" is not printable ASCII`},
		{"/console/dead-letters?since=0000-01-01", "since 0000-01-01 is outside the years 1000-9999"},
		{"/console/dead-letters?since=999999999d", `since "999999999d" is more than 36524 days back`},
		{"/console/dead-letters?until=0000-01-01", "until 0000-01-01 is outside the years 1000-9999"},
		{"/console/fulfilment?since=0000-01-01", "since 0000-01-01 is outside the years 1000-9999"},
		{"/console/fulfilment?since=999999999d", `since "999999999d" is more than 36524 days back`},
		{"/console/tasks?status=PENDING&after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
		{"/console/dead-letters?after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
		{"/console/runs?after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
		{"/console/fulfilment?after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
		{"/console/outbox?after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
		{"/console/refunds?after=" + y0, "after 0000-01-01 is outside the years 1000-9999"},
	} {
		pg := b.get(tc.path)
		require.Equal(t, http.StatusBadRequest, pg.status, "%s: %.300s", tc.path, pg.body)
		require.Contains(t, html.UnescapeString(pg.body), tc.msg, tc.path)
	}
}
