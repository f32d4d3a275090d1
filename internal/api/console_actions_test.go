package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each action is refused without its CSRF token, first answers with a
// confirmation that changes nothing, then does it and says what changed.
func TestConsoleActions(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	b.signIn(aliceToken)
	csrf := b.csrf()
	letterStatus := func(no string) string {
		var s string
		require.NoError(t, w.db.Get(&s, `SELECT status FROM order_dead_letter WHERE order_no = ?`, no))
		return s
	}
	taskStatus := func(biz string) string {
		var s string
		require.NoError(t, w.db.Get(&s, `SELECT status FROM job_delay_task WHERE biz_uuid = ?`, biz))
		return s
	}
	requeueO1 := "/console/dead-letters/" + itoa(w.ids["O-1"]) + "/requeue"

	// No CSRF token, a wrong one, or one sent from another site: 403, nothing changes.
	for _, form := range []url.Values{{}, {"csrf": {"forged"}, "confirm": {"yes"}}} {
		p := b.post(requeueO1, form)
		require.Equal(t, http.StatusForbidden, p.status, p.body)
		require.Contains(t, p.body, "CSRF")
	}
	req, err := http.NewRequest("POST", w.srv.URL+requeueO1, strings.NewReader(url.Values{"csrf": {csrf}, "confirm": {"yes"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	res, err := b.hc.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	// Another operator's session's token does not do either.
	other := w.browser(t)
	other.signIn(bobToken)
	require.Equal(t, http.StatusForbidden, b.post(requeueO1, url.Values{"csrf": {other.csrf()}, "confirm": {"yes"}}).status)
	require.Equal(t, "parked", letterStatus("O-1"))

	// Confirm first: nothing changes yet.
	p := b.post(requeueO1, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Confirm: requeue the close dead letter of order O-1")
	require.Contains(t, p.body, `name="confirm" value="yes"`)
	require.Equal(t, "parked", letterStatus("O-1"))
	p = b.post(requeueO1, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Done: requeued the close dead letter of order O-1")
	require.Regexp(t, `<td>status</td><td>parked</td><td>waiting</td>`, p.body)
	require.Equal(t, "waiting", letterStatus("O-1"))

	// The same rules as the CLI and the API: a resolved letter is not requeued.
	p = b.post("/console/dead-letters/"+itoa(w.ids["R-1"])+"/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, p.status, p.body)
	require.Contains(t, p.body, "resolved")
	p = b.post("/console/dead-letters/424242/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusNotFound, p.status)

	// Bulk: the confirmation counts the letters (a dry run), then moves them.
	p = b.post("/console/dead-letters/requeue", url.Values{"csrf": {csrf}, "status": {"parked"}, "since": {"3h"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Confirm: requeue 1 parked dead letter(s)")
	require.Equal(t, "parked", letterStatus(hostileNo))
	p = b.post("/console/dead-letters/requeue", url.Values{"csrf": {csrf}, "status": {"parked"}, "since": {"3h"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "requeued 1 of 1 matching letter(s)")
	require.Equal(t, "waiting", letterStatus(hostileNo))
	p = b.post("/console/dead-letters/requeue", url.Values{"csrf": {csrf}, "status": {"resolved"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "status: status &#34;resolved&#34;: a bulk requeue needs status parked or waiting")

	// Delayed tasks: requeue a FAILED one, cancel a PENDING one; others conflict.
	p = b.post("/console/tasks/task-failed/requeue", url.Values{"csrf": {csrf}})
	require.Contains(t, p.body, "Confirm: requeue task task-failed")
	require.Equal(t, "FAILED", taskStatus("task-failed"))
	p = b.post("/console/tasks/task-failed/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Regexp(t, `<td>status</td><td>FAILED</td><td>PENDING</td>`, p.body)
	require.Regexp(t, `<td>retry count</td><td>4</td><td>0</td>`, p.body)
	require.Equal(t, "PENDING", taskStatus("task-failed"))
	p = b.post("/console/tasks/task-pending/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, "CANCELLED", taskStatus("task-pending"))
	p = b.post("/console/tasks/task-done/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, p.status, p.body)
	require.Contains(t, p.body, "DONE")
	p = b.post("/console/tasks/task-done/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, p.status)
	p = b.post("/console/tasks/nope/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusNotFound, p.status)
	require.Equal(t, "DONE", taskStatus("task-done"))
	// GET does not act (TestConsoleWrongMethods).
	require.Equal(t, http.StatusMethodNotAllowed, b.get("/console/tasks/task-done/cancel").status)
}

// Order numbers and errors holding markup, quotes and non-ASCII are shown
// as text on every page that shows them, and links to them work.
func TestConsoleEscaping(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	b.signIn(aliceToken)
	_, err := w.db.Exec(`INSERT INTO order_info (order_no, user_id, status, create_time) VALUES (?, 1, 0, NOW())`, hostileNo)
	require.NoError(t, err)
	for _, path := range []string{"/console/dead-letters?status=parked", "/console/dead-letters/" + itoa(w.ids[hostileNo]),
		"/console/orders/" + url.PathEscape(hostileNo)} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status, "%s: %s", path, p.body)
		require.NotContains(t, p.body, "<script>", path)
		require.NotContains(t, p.body, `"pwned"`, path)
		require.Contains(t, p.body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&#39;ü订单", path)
		if !strings.HasPrefix(path, "/console/orders/") {
			require.Contains(t, p.body, `boom &lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt; &#34;quoted&#34; &#39;single&#39; 错误`, path)
		}
		// The order link is a path-escaped URL that leads to the order.
		require.Contains(t, p.body, `href="/console/orders/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E%27%C3%BC%E8%AE%A2%E5%8D%95"`, path)
	}
	p := b.get("/console/orders/" + url.PathEscape(hostileNo))
	require.Contains(t, p.body, "<h1>Order &lt;script&gt;")
	// The signin page shows only messages it chose, keyed by ?why=.
	for why, want := range map[string]string{
		`<b onmouseover="x">`: "",
		"Your account is locked. Email it to security@evil.example now": "",
		"expired": "your session expired: sign in again",
		"invalid": "your session is not valid here",
	} {
		p = b.get("/console/signin?why=" + url.QueryEscape(why))
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "onmouseover", why)
		require.NotContains(t, p.body, "evil.example", why)
		require.NotContains(t, p.body, "locked", why)
		if want != "" {
			require.Contains(t, p.body, want, why)
		} else {
			require.NotContains(t, p.body, `role="alert"`, why)
		}
	}
}

// Parked outbox events and refunds owed: listed, shown, and acted on
// through the same views as the CLI and the API; a refund is recorded with
// the operator's name.
func TestConsoleOutboxAndRefunds(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	ov := b.signIn(aliceToken)
	require.Contains(t, ov.body, "Refunds owed")
	require.Contains(t, ov.body, `href="/console/refunds?status=owed">2</a>`)
	require.Contains(t, ov.body, `href="/console/refunds?status=owed">35.50</a>`)
	require.Contains(t, ov.body, `href="/console/outbox?status=parked">1</a>`, "parked events show even in local mode")
	csrf := b.csrf()
	var eventID int64
	require.NoError(t, w.db.Get(&eventID, `SELECT id FROM order_outbox WHERE status = 'parked'`))

	for path, want := range map[string]string{
		"/console/outbox?status=parked":    "permanent answer: status 410",
		"/console/outbox/" + itoa(eventID): "inventory service answered 410",
		"/console/refunds?status=owed":     "wx-late-1",
		"/console/refunds/wx-late-1":       "late: the order was closed",
		"/console/refunds?orderNo=O-3":     "ali-dup-2",
		"/console/orders/O-2":              "wx-late-1",
		"/console/outbox?status=lost":      "status: status &#34;lost&#34;",
		"/console/refunds?status=lost":     "status: status &#34;lost&#34;",
	} {
		p := b.get(path)
		wantStatus := http.StatusOK
		if strings.Contains(path, "lost") {
			wantStatus = http.StatusBadRequest
		}
		require.Equal(t, wantStatus, p.status, "%s: %s", path, p.body)
		require.Contains(t, p.body, want, path)
	}
	require.Equal(t, http.StatusNotFound, b.get("/console/outbox/987654").status)
	require.Equal(t, http.StatusNotFound, b.get("/console/refunds/nope").status)

	p := b.post("/console/outbox/"+itoa(eventID)+"/requeue", url.Values{"csrf": {csrf}})
	require.Contains(t, p.body, "Confirm: requeue the stock.release event of order O-2")
	p = b.post("/console/outbox/"+itoa(eventID)+"/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Regexp(t, `<td>status</td><td>parked</td><td>pending</td>`, p.body)
	p = b.post("/console/outbox/"+itoa(eventID)+"/requeue", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, p.status, "only parked events are requeued")

	p = b.post("/console/refunds/wx-late-1/refunded", url.Values{"csrf": {csrf}, "note": {"refund R-77"}})
	require.Contains(t, p.body, "Confirm: record the refund of payment wx-late-1")
	require.Contains(t, p.body, "recorded as done by alice")
	require.Contains(t, p.body, `name="note" value="refund R-77"`)
	p = b.post("/console/refunds/wx-late-1/refunded", url.Values{"csrf": {csrf}, "note": {"refund R-77"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "recorded by alice")
	var st, by, note string
	require.NoError(t, w.db.QueryRow(`SELECT refund_status, refunded_by, refund_note FROM payment_conflict WHERE payment_id = 'wx-late-1'`).Scan(&st, &by, &note))
	require.Equal(t, []string{"refunded", "alice", "refund R-77"}, []string{st, by, note})
	p = b.post("/console/refunds/wx-late-1/refunded", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, b.get("/console/refunds/wx-late-1").body, "alice")
}
