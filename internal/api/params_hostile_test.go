package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// operatorAPI serves every JSON operator API over the console world's
// database, behind the token call sends.
func operatorAPI(t *testing.T, w *consoleWorld) *httptest.Server {
	t.Helper()
	s := New(Config{Token: "tok"})
	s.MountDelayTasks(w.tasks)
	s.MountOutbox(HomeOnly(outbox.NewOps(w.db.DB)))
	s.MountRefunds(HomeOnly(refunds.New(w.db.DB)))
	s.MountDeadLetters(HomeOnly(deadletters.New(w.db.DB)))
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

// A route that reads or changes one thing took any query parameter and
// ignored it: POST /api/delay-tasks?sorce=db1 registered the task in
// mysql.dsn's database, and a refund recorded with ?Source=db1 was
// recorded there too. Every route now refuses a parameter it does not
// know, as the lists always did, and changes nothing.
func TestAPIRefusesUnknownQueryParams(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	hs := operatorAPI(t, w)
	var outboxID int64
	require.NoError(t, w.db.Get(&outboxID, `SELECT id FROM order_outbox WHERE status = 'parked'`))
	event := "/api/outbox/events/" + itoa(outboxID)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/delay-tasks", `{"bizUuid":"typo-1","handler":"orderTimeoutClose","delayMs":1,"payload":{"orderNo":"O-1"}}`},
		{"GET", "/api/delay-tasks/stats", ""},
		{"GET", "/api/delay-tasks/check", ""},
		{"GET", "/api/delay-tasks/task-pending", ""},
		{"DELETE", "/api/delay-tasks/task-pending", ""},
		{"POST", "/api/delay-tasks/task-failed/requeue", ""},
		{"GET", event, ""},
		{"POST", event + "/requeue", ""},
		{"GET", "/api/outbox/stats", ""},
		{"GET", "/api/refunds/summary", ""},
		{"GET", "/api/refunds/wx-late-1", ""},
		{"POST", "/api/refunds/wx-late-1/refunded", `{"note":"paid back"}`},
	} {
		before := operatorState(t, w)
		a := call(t, hs, tc.method, tc.path+"?sorce=db1", tc.body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s %s: %s", tc.method, tc.path, a.raw)
		require.Equal(t, "sorce", a.body["field"], "%s %s", tc.method, tc.path)
		require.Equal(t, `unknown query parameter "sorce" (allowed: [source])`, a.body["error"], "%s %s", tc.method, tc.path)
		require.Equal(t, before, operatorState(t, w), "%s %s changed something", tc.method, tc.path)
		// With ?source= alone the route answers as before.
		a = call(t, hs, tc.method, tc.path+"?source=default", tc.body)
		require.Less(t, a.status, 300, "%s %s: %s", tc.method, tc.path, a.raw)
	}
}

// operatorState is what the operator APIs and the console's actions can
// change in the console world: the statuses of the tasks, the outbox
// events, the refunds and the dead letters.
func operatorState(t *testing.T, w *consoleWorld) string {
	t.Helper()
	var s string
	require.NoError(t, w.db.Get(&s, `SELECT CONCAT_WS(' | ',
		(SELECT GROUP_CONCAT(biz_uuid, '=', status ORDER BY id) FROM job_delay_task),
		(SELECT GROUP_CONCAT(id, '=', status ORDER BY id) FROM order_outbox),
		(SELECT GROUP_CONCAT(payment_id, '=', refund_status ORDER BY id) FROM payment_conflict),
		(SELECT GROUP_CONCAT(id, '=', status, '@', next_retry_at ORDER BY id) FROM order_dead_letter))`))
	return s
}

// A refund's body over the port's 1 MiB answered 400 "body is not the
// expected JSON: http: request body too large", and a second JSON value
// after the note was ignored: {"note":"x"}{"by":"mallory"} recorded the
// refund. Now 413, and 400 for anything after the value, recording
// nothing.
func TestAPIRefundBodyLimits(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	hs := operatorAPI(t, w)
	const path = "/api/refunds/wx-late-1/refunded"
	before := operatorState(t, w)
	a := call(t, hs, "POST", path, `{"note":"`+strings.Repeat("x", MaxBodyBytes)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, a.raw)
	require.JSONEq(t, `{"error":"body is larger than 1048576 bytes"}`, a.raw)
	for _, body := range []string{`{"note":"x"}{"by":"mallory"}`, `{"note":"x"}]`, `{"note":"x"} x`, `{"note":"x"},`} {
		a = call(t, hs, "POST", path, body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.raw)
		require.JSONEq(t, `{"error":"body has data after the JSON value","field":"body"}`, a.raw, body)
	}
	// Wrong types and fields are named in the API's words, not Go's
	// ("Go struct field refundNote.note of type string").
	for _, tc := range []struct{ body, want string }{
		{`{"note":1}`, `{"error":"note: expected string, got JSON number","field":"note"}`},
		{`["x"]`, `{"error":"body: expected a JSON object, got JSON array","field":"body"}`},
		{`{"nope":1}`, `{"error":"unknown field \"nope\" (fields: note, by)","field":"body"}`},
		{`{"note":"x"`, `{"error":"body is not valid JSON: it ends too early","field":"body"}`},
		// encoding/json matched these case-insensitively, or took the last.
		{`{"NOTE":"x"}`, `{"error":"unknown field \"NOTE\" (fields: note, by)","field":"body"}`},
		{`{"note":"x","By":"api"}`, `{"error":"unknown field \"By\" (fields: note, by)","field":"body"}`},
		{`{"note":"x","note":"y"}`, `{"error":"note is given twice","field":"note"}`},
	} {
		a = call(t, hs, "POST", path, tc.body)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", tc.body, a.raw)
		require.JSONEq(t, tc.want, a.raw, tc.body)
	}
	a = call(t, hs, "POST", "/api/delay-tasks", `[]`)
	require.JSONEq(t, `{"error":"body: expected a JSON object, got JSON array"}`, a.raw)
	require.Equal(t, before, operatorState(t, w), "a refused body recorded the refund")
	a = call(t, hs, "POST", path, "{\"note\":\"paid back\"}\n")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "paid back", a.body["refundNote"])
}

// URL.Query drops, without a word, a pair with a bad escape or a
// semicolon, and every pair when there are more than 10,000: the routes
// ran without the filter or the ?source= they were given. A query string
// that does not parse whole is now a 400 and nothing runs.
func TestAPIRefusesQueryItCannotRead(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	hs := operatorAPI(t, w)
	before := operatorState(t, w)
	for _, tc := range []struct{ method, path, msg string }{
		// Read before as ?status=owed: every refund owed, not none.
		{"GET", "/api/refunds?status=owed&orderNo=%zz", `invalid URL escape "%zz"`},
		// Cancelled in mysql.dsn's database before, the source unread.
		{"DELETE", "/api/delay-tasks/task-pending?source=nosuch;x=1", "invalid semicolon separator in query"},
		{"POST", "/api/refunds/wx-late-1/refunded?source=nosuch" + strings.Repeat("&", 10000), "number of URL query parameters exceeded limit"},
		{"POST", "/api/dead-letters/O-1/requeue?source=nosuch&stage=%", `invalid URL escape "%"`},
	} {
		a := call(t, hs, tc.method, tc.path, "")
		require.Equal(t, http.StatusBadRequest, a.status, "%s %.80s: %s", tc.method, tc.path, a.raw)
		require.Equal(t, "the query string is not valid: "+tc.msg, a.body["error"], "%s %.80s", tc.method, tc.path)
	}
	require.Equal(t, before, operatorState(t, w), "a refused request changed something")
}

// Every 404 of the operator APIs names the path's field and what was
// asked for, as the delayed tasks' and dead letters' did: the outbox's
// and the refunds' were their package's error ("orders: outbox event not
// found") without a field.
func TestAPINotFoundNamesTheField(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	hs := operatorAPI(t, w)
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/api/outbox/events/99999999", "", `{"error":"no outbox event 99999999","field":"id"}`},
		{"POST", "/api/outbox/events/99999999/requeue", "", `{"error":"no outbox event 99999999","field":"id"}`},
		{"GET", "/api/refunds/nope%3Cb%3E", "", `{"error":"no payment conflict with payment id \"nope<b>\"","field":"paymentId"}`},
		{"POST", "/api/refunds/nope/refunded", `{"note":"x"}`, `{"error":"no payment conflict with payment id \"nope\"","field":"paymentId"}`},
		{"GET", "/api/delay-tasks/nope", "", `{"error":"no task with bizUuid \"nope\"","field":"bizUuid"}`},
		{"GET", "/api/dead-letters/nope", "", `{"error":"no close dead letter for order \"nope\"","field":"orderNo"}`},
	} {
		a := call(t, hs, tc.method, tc.path, tc.body)
		require.Equal(t, http.StatusNotFound, a.status, "%s %s: %s", tc.method, tc.path, a.raw)
		require.JSONEq(t, tc.want, a.raw, "%s %s", tc.method, tc.path)
	}
}
