package api

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// signedIn returns a console over a fresh fixture and alice's browser,
// signed in, with the session's CSRF token.
func signedIn(t *testing.T) (*consoleWorld, *browser, string) {
	t.Helper()
	w := newConsoleWorld(t)
	b := w.browser(t)
	b.signIn(aliceToken)
	return w, b, b.csrf()
}

// Every list page, opened with no query at all (as from a bookmark or the
// navigation bar), shows its filter form with every filter it accepts.
func TestConsoleListsWithoutQueryShowFilters(t *testing.T) {
	t.Parallel()
	_, b, _ := signedIn(t)
	for _, tc := range []struct {
		path   string
		fields []string // the filter form's fields; none: the page has no filters
		row    string
	}{
		{"/console/dead-letters", []string{"status", "stage", "since", "until", "error"}, ">O-1</a>"},
		{"/console/tasks", []string{"status", "handler", "bizUuid", "traceId"}, "task-failed"},
		{"/console/outbox", []string{"status", "eventType", "orderNo"}, "stock.release"},
		{"/console/refunds", []string{"status", "orderNo"}, "wx-late-1"},
		{"/console/fulfilment", []string{"since", "open"}, ">O-3</a>"},
		{"/console/runs", nil, "xxl-job log 41"},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/console/"), func(t *testing.T) {
			p := b.get(tc.path)
			require.Equal(t, http.StatusOK, p.status, p.body)
			require.Contains(t, p.body, tc.row)
			if tc.fields == nil {
				require.NotContains(t, p.body, `class="filters"`)
				return
			}
			form := regexp.MustCompile(`(?s)<form class="filters" method="get" action="` + regexp.QuoteMeta(tc.path) + `">.*?</form>`).FindString(p.body)
			require.NotEmpty(t, form, "no filter form on %s", tc.path)
			for _, f := range tc.fields {
				require.Regexp(t, `<(input|select) name="`+f+`"`, form, "filter %s", f)
			}
			require.NotRegexp(t, `<option value="[^"]+" selected>`, form, "no filter was chosen")
		})
	}
	// With a query the form shows what was asked.
	p := b.get("/console/tasks?status=FAILED&handler=orderTimeoutClose")
	require.Contains(t, p.body, `<option value="FAILED" selected>`)
	require.Contains(t, p.body, `name="handler" value="orderTimeoutClose"`)
}

// The close runs say whether each run failed and why: an error that
// stopped it, or orders it dead-lettered (what the overview counts as
// failed).
func TestConsoleRunsShowFailures(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	_, err := w.db.Exec(`INSERT INTO order_close_run (started_at, finished_at, host, source, scanned, closed, dead_lettered, result, error) VALUES
		(NOW(3) - INTERVAL 5 MINUTE, NOW(3) - INTERVAL 5 MINUTE, 'h2', 'xxl-job log 42', 9, 7, 2, 'scanned=9 closed=7 dead_lettered=2', ''),
		(NOW(3) - INTERVAL 4 MINUTE, NOW(3) - INTERVAL 4 MINUTE, 'h2', 'xxl-job log 43', 0, 0, 0, 'scanned=0 closed=0', 'claim due orders: Error 1205: Lock wait timeout exceeded')`)
	require.NoError(t, err)
	b := w.browser(t)
	ov := b.signIn(aliceToken)
	require.Regexp(t, `<dt>failed</dt><dd class="bad"><a href="/console/runs">2</a>`, ov.body)
	for _, path := range []string{"/console/runs", "/console/"} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Contains(t, p.body, "<th>Outcome</th>")
		for _, want := range []string{
			`<span class="bad">failed: claim due orders: Error 1205: Lock wait timeout exceeded</span>`,
			`<span class="bad">failed: 2 order(s) dead-lettered</span>`,
			`ok<br><span class="muted">scanned=5 closed=5`,
		} {
			require.Contains(t, p.body, want, path)
		}
	}
}

// A page of something that does not exist says so plainly, without the
// error chain behind it.
func TestConsoleNotFoundIsPlain(t *testing.T) {
	t.Parallel()
	_, b, csrf := signedIn(t)
	for _, tc := range []struct {
		method, path, title string
	}{
		{"GET", "/console/orders/NOSUCH", "No order NOSUCH"},
		{"GET", "/console/dead-letters/999999", "No dead letter 999999"},
		{"POST", "/console/dead-letters/999999/requeue", "No dead letter 999999"},
		{"GET", "/console/tasks/nope", "No delayed task with bizUuid nope"},
		{"POST", "/console/tasks/nope/cancel", "No delayed task with bizUuid nope"},
		{"GET", "/console/outbox/987654", "No outbox event 987654"},
		{"POST", "/console/outbox/987654/requeue", "No outbox event 987654"},
		{"GET", "/console/refunds/nope", "No payment nope"},
		{"POST", "/console/refunds/nope/refunded", "No payment nope"},
	} {
		var p page
		if tc.method == "GET" {
			p = b.get(tc.path)
		} else {
			p = b.post(tc.path, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
		}
		require.Equal(t, http.StatusNotFound, p.status, "%s %s: %s", tc.method, tc.path, p.body)
		require.Contains(t, p.body, "<h1>"+tc.title+"</h1>", tc.path)
		require.Contains(t, p.body, "<title>"+tc.title+" · order-job console</title>", tc.path)
		require.NotContains(t, p.body, "not found", tc.path)
		require.NotContains(t, p.body, `class="message"`, tc.path)
	}
}

// Requeueing a letter that is already waiting says so, on the
// confirmation and on the result, and never "waiting → waiting".
func TestConsoleRequeueWaitingLetter(t *testing.T) {
	t.Parallel()
	w, b, csrf := signedIn(t)
	path := "/console/dead-letters/" + itoa(w.ids["W-1"]) + "/requeue"

	p := b.post(path, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "the letter is already waiting: its next retry moves from ")
	require.NotContains(t, p.body, "waiting → waiting")
	p = b.post(path, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "The letter was already waiting; its next retry is now due.")
	require.NotContains(t, p.body, "<td>status</td>")
	require.Regexp(t, `<td>next retry at</td><td>`+timeRe+`</td><td>`+timeRe+`</td>`, p.body)

	// The bulk requeue of waiting letters says the same.
	p = b.post("/console/dead-letters/requeue", url.Values{"csrf": {csrf}, "status": {"waiting"}, "since": {"1h"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "each is already waiting and stays so")
	require.NotContains(t, p.body, "waiting → waiting")
	p = b.post("/console/dead-letters/requeue", url.Values{"csrf": {csrf}, "status": {"waiting"}, "since": {"1h"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<td>already waiting, next retry moved to now</td>")
	require.NotContains(t, p.body, "waiting → waiting")
}

// timeRe is the console's one time format: the database's wall clock, or
// UTC marked as such.
const timeRe = `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}( UTC)?`

// Every page, lists, details and the results of actions, writes its times
// in the one format.
func TestConsoleOneTimeFormat(t *testing.T) {
	t.Parallel()
	w, b, csrf := signedIn(t)
	var eventID int64
	require.NoError(t, w.db.Get(&eventID, `SELECT id FROM order_outbox WHERE status = 'parked'`))
	confirm := url.Values{"csrf": {csrf}, "confirm": {"yes"}}
	pages := map[string]page{
		"letters":         b.get("/console/dead-letters"),
		"letter":          b.get("/console/dead-letters/" + itoa(w.ids["O-1"])),
		"task":            b.get("/console/tasks/task-failed"),
		"outbox":          b.get("/console/outbox"),
		"refund":          b.get("/console/refunds/wx-late-1"),
		"requeue letter":  b.post("/console/dead-letters/"+itoa(w.ids["O-1"])+"/requeue", confirm),
		"requeue task":    b.post("/console/tasks/task-failed/requeue", confirm),
		"requeue event":   b.post("/console/outbox/"+itoa(eventID)+"/requeue", confirm),
		"record a refund": b.post("/console/refunds/wx-late-1/refunded", confirm),
	}
	other := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d`)
	for name, p := range pages {
		require.Equal(t, http.StatusOK, p.status, "%s: %s", name, p.body)
		require.Regexp(t, timeRe, p.body, name)
		require.Empty(t, other.FindAllString(p.body, -1), "%s writes times in another format", name)
	}
	require.Regexp(t, `<td>next retry at</td><td>`+timeRe+`</td>`, pages["requeue letter"].body)
	require.Regexp(t, `<td>next attempt</td><td>`+timeRe+`</td>`, pages["requeue task"].body)
	require.Regexp(t, `<td>refunded at</td><td></td><td>`+timeRe+`</td>`, pages["record a refund"].body)
}
