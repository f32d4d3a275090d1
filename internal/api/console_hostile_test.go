package api

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// aliceSignedIn is a console world with alice signed in: her browser and
// her CSRF token.
func aliceSignedIn(t *testing.T) (*consoleWorld, *browser, string) {
	t.Helper()
	w := newConsoleWorld(t)
	b := w.browser(t)
	b.signIn(aliceToken)
	return w, b, b.csrf()
}

// A console path with a method it does not take was 404 "no console page"
// (its catch-all took every method) and a GET of sign-out a 403: now 405
// with Allow, and nothing runs. Unknown paths stay 404.
func TestConsoleWrongMethods(t *testing.T) {
	t.Parallel()
	w, b, token := aliceSignedIn(t)
	csrf := url.Values{"csrf": {token}}
	letter := "/console/dead-letters/" + itoa(w.ids["O-1"])
	before := operatorState(t, w)
	for _, tc := range []struct {
		method, path string
		form         url.Values
		allow        string
	}{
		{"GET", letter + "/requeue", nil, "POST"},
		{"GET", "/console/tasks/task-failed/cancel", nil, "POST"},
		{"PUT", "/console/tasks/task-failed/requeue", nil, "POST"},
		{"GET", "/console/outbox/1/requeue", nil, "POST"},
		{"GET", "/console/refunds/wx-late-1/refunded", nil, "POST"},
		{"DELETE", "/console/tasks/task-failed", nil, "GET, HEAD"},
		{"POST", "/console/dead-letters", csrf, "GET, HEAD"},
		{"POST", letter, csrf, "GET, HEAD"},
		{"GET", "/console/signout", nil, "POST"},
	} {
		p := b.do(tc.method, tc.path, tc.form)
		require.Equal(t, http.StatusMethodNotAllowed, p.status, "%s %s: %.300s", tc.method, tc.path, p.body)
		require.Equal(t, tc.allow, p.header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	require.Equal(t, before, operatorState(t, w), "a refused request changed something")
	require.Equal(t, http.StatusOK, b.get("/console/").status, "GET /console/signout signed out")
	for _, path := range []string{"/console/nowhere", letter + "/x", "/console/tasks/task-failed/requeue/x"} {
		p := b.get(path)
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.Empty(t, p.header.Get("Allow"), path)
	}
}

// A form over 64 KiB, or one whose body is not URL-encoded, was read as an
// empty form: 403 "CSRF token missing" for an action, a failed sign-in
// (counted against the address) for the sign-in. Now 413 and 400, and
// nothing runs.
func TestConsoleFormBody(t *testing.T) {
	t.Parallel()
	w, b, csrf := aliceSignedIn(t)
	before := operatorState(t, w)
	pad := strings.Repeat("x", maxFormBytes)
	for _, tc := range []struct {
		path   string
		form   url.Values
		status int
	}{
		{"/console/tasks/task-failed/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}, "pad": {pad}}, http.StatusRequestEntityTooLarge},
		{"/console/signin", url.Values{"token": {aliceToken}, "pad": {pad}}, http.StatusRequestEntityTooLarge},
		{"/console/signout", url.Values{"csrf": {csrf}, "pad": {pad}}, http.StatusRequestEntityTooLarge},
	} {
		p := b.post(tc.path, tc.form)
		require.Equal(t, tc.status, p.status, "%s: %.300s", tc.path, p.body)
		require.Contains(t, p.body, "the form is larger than 65536 bytes", tc.path)
	}
	req, err := http.NewRequest(http.MethodPost, b.base+"/console/tasks/task-failed/requeue", strings.NewReader("csrf="+csrf+"&confirm=yes&x=%zz"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, before, operatorState(t, w))
	require.Equal(t, http.StatusOK, b.get("/console/").status, "still signed in")
}

// The console read a query string it could not parse as what was left of
// it: /console/dead-letters?status=parked;x showed every letter. Now 400.
func TestConsoleRefusesQueryItCannotRead(t *testing.T) {
	t.Parallel()
	w, b, csrf := aliceSignedIn(t)
	before := operatorState(t, w)
	for _, path := range []string{"/console/dead-letters?status=parked;x=1", "/console/orders?orderNo=%zz",
		"/console/refunds?source=nosuch" + strings.Repeat("&", 10000)} {
		p := b.get(path)
		require.Equal(t, http.StatusBadRequest, p.status, "%.80s: %.300s", path, p.body)
		require.Contains(t, p.body, "the query string is not valid", path)
	}
	p := b.post("/console/tasks/task-pending/cancel?source=nosuch;", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusBadRequest, p.status, p.body)
	require.Equal(t, before, operatorState(t, w))
}

// A sign-in's "next" holding a control character was sent back as it was
// in Location ("/console/../\t/x": url.Parse fails on the tab, so
// http.Redirect neither cleaned nor escaped it, and a browser drops the
// tab before reading the URL). Now such a "next" is the overview.
func TestConsoleSignInNextControlCharacters(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	for _, next := range []string{"/console/../\t/evil.example/", "/console/\x00", "/console/\x7f", "/console/\r\nSet-Cookie: x=1"} {
		p := b.post("/console/signin", url.Values{"token": {aliceToken}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, p.status, "%q: %s", next, p.body)
		require.Equal(t, "/console/", p.header.Get("Location"), "%q", next)
		p = b.get("/console/signin?next=" + url.QueryEscape(next))
		require.Contains(t, p.body, `name="next" value="/console/"`, "%q", next)
	}
	p := b.post("/console/signin", url.Values{"token": {aliceToken}, "next": {"/console/orders/%09x"}})
	require.Equal(t, "/console/orders/%09x", p.header.Get("Location"), "an escaped tab is a path's text")
}

// A form's note holding bytes that are not UTF-8 failed the refund's
// UPDATE (Error 1366 on the utf8mb4 column): a 500. Now a 400 naming the
// note, and the refund stays owed. (Through the JSON API such bytes arrive
// as U+FFFD.)
func TestConsoleRefundNoteNotUTF8(t *testing.T) {
	t.Parallel()
	w, b, csrf := aliceSignedIn(t)
	before := operatorState(t, w)
	p := b.post("/console/refunds/wx-late-1/refunded", url.Values{"csrf": {csrf}, "note": {"refund \xff\xfe"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusBadRequest, p.status, p.body)
	require.Contains(t, p.body, `note: note &#34;refund \xff\xfe&#34; is not UTF-8 text`)
	require.Equal(t, before, operatorState(t, w))
	p = b.post("/console/refunds/wx-late-1/refunded", url.Values{"csrf": {csrf}, "note": {"退款 😀 \x00"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
}

var formAction = regexp.MustCompile(`<form method="post" action="([^"]*)"`)

// The confirmation's form went to the request's decoded path: for the
// payment "p#1" to /console/refunds/p#1/refunded (a 405 on
// /console/refunds/p), for "p/1" to a path with one segment more (404),
// and for "p%2F1" to /console/refunds/p%2F1/refunded, which records the
// refund of "p/1" instead. It now goes where the request came, escaped.
func TestConsoleRefundOfAnyPaymentID(t *testing.T) {
	t.Parallel()
	w, b, csrf := aliceSignedIn(t)
	ids := []string{"p%2F1", "p/1", "p#1", "p?1", "p 1"}
	for _, id := range ids {
		_, err := w.db.Exec(`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason) VALUES (?, 'O-2', 1, NOW(3), 'late')`, id)
		require.NoError(t, err)
	}
	refunded := func() []string {
		var got []string
		require.NoError(t, w.db.Select(&got, `SELECT payment_id FROM payment_conflict WHERE refund_status = 'refunded' ORDER BY id`))
		return got
	}
	for i, id := range ids {
		p := b.post("/console/refunds/"+url.PathEscape(id)+"/refunded", url.Values{"csrf": {csrf}, "note": {"n"}})
		require.Equal(t, http.StatusOK, p.status, "%s: %.300s", id, p.body)
		m := formAction.FindStringSubmatch(p.body)
		require.NotNil(t, m, "%s: no confirmation form", id)
		p = b.post(html.UnescapeString(m[1]), url.Values{"csrf": {csrf}, "note": {"n"}, "confirm": {"yes"}})
		require.Equal(t, http.StatusOK, p.status, "%s: %.300s", id, p.body)
		require.Equal(t, ids[:i+1], refunded(), "confirming %q", id)
	}
	// The choice of order database stays on the page too: an order's page
	// of "H/1" offered H/1's page of the other database at /console/orders/H/1.
	sw := newSourcesWorld(t)
	_, err := sw.home.Exec(`INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes) VALUES ('H/1', 9, 0, NOW(), 30)`)
	require.NoError(t, err)
	p := sw.b.get("/console/orders/H%2F1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<form class="filters source" method="get" action="/console/orders/H%2F1">`)
}
