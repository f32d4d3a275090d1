package api

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
)

// hostileNo is an order number holding markup, quotes and non-ASCII: every
// page must show it as text.
const hostileNo = `<script>alert("x")</script>'ü订单`

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-9876543210ab"
)

// consoleWorld is a console over a database holding a little of
// everything: orders, dead letters in each status (one of a hostile order
// number), tasks, a fulfilment flag and close runs.
type consoleWorld struct {
	db    *dbtest.DB
	srv   *httptest.Server
	tasks *delay.Client
	clock *testClock
	ids   map[string]int64 // dead-letter ids by order number
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newConsoleWorld(t *testing.T) *consoleWorld {
	t.Helper()
	ctx := context.Background()
	w := &consoleWorld{db: dbtest.New(t), clock: &testClock{t: time.Now()}, ids: map[string]int64{}}
	for _, stmt := range []string{
		`INSERT INTO inventory (sku_id, available, locked) VALUES (1, 100, 2), (2, 50, 0)`,
		`INSERT INTO user_coupon (id, user_id, status, order_no) VALUES (7, 9, 1, 'O-1')`,
		`INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes, coupon_id) VALUES
			('O-1', 9, 0, NOW() - INTERVAL 2 HOUR, 30, 7), ('O-2', 9, 2, NOW() - INTERVAL 3 HOUR, 30, NULL),
			('O-3', 9, 1, NOW() - INTERVAL 9 DAY, 30, NULL)`,
		`UPDATE order_info SET close_time = NOW(3), close_reason = 'payment_timeout' WHERE order_no = 'O-2'`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 9 DAY WHERE order_no = 'O-3'`,
		`INSERT INTO order_item (order_no, sku_id, quantity) VALUES ('O-1', 1, 2), ('O-1', 2, 1), ('O-2', 2, 1)`,
		`INSERT INTO order_close_log (order_no, closed_at, reason) VALUES ('O-2', NOW(3), 'payment_timeout')`,
		`INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at)
			SELECT id, order_no, user_id, pay_time, pay_time + INTERVAL 7 DAY, NOW(3) - INTERVAL 1 HOUR FROM order_info WHERE order_no = 'O-3'`,
		`INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, attempts, next_attempt_at, last_error, park_reason, parked_at, created_at) VALUES
			('stock.release', 'O-2', '{"orderNo":"O-2"}', 'tr-1', 'parked', 3, UTC_TIMESTAMP(3), 'inventory service answered 410', 'permanent answer: status 410', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)),
			('coupon.restore', 'O-2', '{}', 'tr-2', 'done', 1, UTC_TIMESTAMP(3), '', '', NULL, UTC_TIMESTAMP(3))`,
		`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason, channel) VALUES
			('wx-late-1', 'O-2', 25.50, NOW(3), 'late', 'wechat'), ('ali-dup-2', 'O-3', 10.00, NOW(3), 'duplicate', 'alipay')`,
		`INSERT INTO order_close_run (started_at, finished_at, host, source, scanned, closed, max_lateness_ms, result) VALUES
			(NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 'h1', 'xxl-job log 41', 5, 5, 1500, 'scanned=5 closed=5 skipped_paid=0 skipped_locked=0 dead_lettered=0 seconds=0.100')`,
	} {
		_, err := w.db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	_, err := w.db.ExecContext(ctx, `INSERT INTO order_dead_letter
		(order_no, stage, status, status_reason, last_error, attempts, next_retry_at, updated_at) VALUES
		('O-1', 'close', 'parked', 'parked after 8 failed attempts', 'close order O-1: inventory row of sku 5 is missing', 8, NOW(3), NOW(3) - INTERVAL 2 HOUR),
		(?, 'close', 'parked', 'parked after 8 failed attempts', ?, 8, NOW(3), NOW(3) - INTERVAL 1 HOUR),
		('W-1', 'close', 'waiting', '', 'coupon 9 is status 2', 2, NOW(3) + INTERVAL 1 HOUR, NOW(3)),
		('R-1', 'close', 'resolved', 'order is paid; nothing to close', 'old', 1, NOW(3), NOW(3) - INTERVAL 1 DAY)`,
		hostileNo, `boom <script>document.title="pwned"</script> "quoted" 'single' 错误`)
	require.NoError(t, err)
	rows, err := w.db.QueryContext(ctx, `SELECT order_no, id FROM order_dead_letter`)
	require.NoError(t, err)
	for rows.Next() {
		var no string
		var id int64
		require.NoError(t, rows.Scan(&no, &id))
		w.ids[no] = id
	}
	require.NoError(t, rows.Err())
	rows.Close()

	w.tasks, err = delay.NewClient(w.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	for _, biz := range []string{"task-failed", "task-pending", "task-done"} {
		_, _, err := w.tasks.Register(ctx, delay.Registration{BizUUID: biz, Handler: "orderTimeoutClose", Delay: time.Hour,
			Payload: map[string]string{"orderNo": "O-1"}})
		require.NoError(t, err)
	}
	_, err = w.db.ExecContext(ctx, `UPDATE job_delay_task SET status = 'FAILED', retry_count = 4, last_error = 'handler: boom' WHERE biz_uuid = 'task-failed'`)
	require.NoError(t, err)
	_, err = w.db.ExecContext(ctx, `UPDATE job_delay_task SET status = 'DONE' WHERE biz_uuid = 'task-done'`)
	require.NoError(t, err)

	srv := New(Config{Token: "api-token"})
	require.NoError(t, srv.MountConsole(ConsoleConfig{Operators: []Operator{{"alice", aliceToken}, {"bob", bobToken}},
		Session: time.Hour, DB: w.db.DB, Due: closeUnits(t, w.db, "order_info"), Tasks: w.tasks, Now: w.clock.now}))
	w.srv = httptest.NewServer(srv)
	t.Cleanup(w.srv.Close)
	return w
}

// browser is a client with a cookie jar that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (w *consoleWorld) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: w.srv.URL, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
	}
	res, err := b.hc.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return page{status: res.StatusCode, header: res.Header, body: string(raw)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values) page { return b.do(http.MethodPost, path, form) }

// signIn signs in with token and returns the overview.
func (b *browser) signIn(token string) page {
	b.t.Helper()
	p := b.post("/console/signin", url.Values{"token": {token}, "next": {"/console/"}})
	require.Equal(b.t, http.StatusSeeOther, p.status, p.body)
	return b.get("/console/")
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the signed-in session, from a page.
func (b *browser) csrf() string {
	b.t.Helper()
	m := csrfRe.FindStringSubmatch(b.get("/console/").body)
	require.NotNil(b.t, m, "no CSRF token on the overview")
	return m[1]
}

func TestConsoleOffWithoutTokens(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	srv := New(Config{Token: "api-token"})
	require.NoError(t, srv.MountConsole(ConsoleConfig{DB: db.DB}))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/console/", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "api.consoleTokens is empty")
	require.Contains(t, rec.Body.String(), "The console is off")
	// The JSON APIs keep their header token.
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/api/dead-letters", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
}

func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)

	p := b.get("/console/dead-letters?status=parked")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/signin?next=%2Fconsole%2Fdead-letters%3Fstatus%3Dparked", p.header.Get("Location"))
	p = b.get("/console/signin?next=%2Fconsole%2Fdead-letters%3Fstatus%3Dparked")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `name="next" value="/console/dead-letters?status=parked"`)

	// A token that is not in api.consoleTokens (the API's own token
	// included) is refused.
	for _, bad := range []string{"", "api-token", "alice-token-012345678", aliceToken + "x", "alice:" + aliceToken} {
		p = b.post("/console/signin", url.Values{"token": {bad}})
		require.Equal(t, http.StatusUnauthorized, p.status, bad)
		require.Contains(t, p.body, "that token is not one of api.consoleTokens")
		require.Empty(t, p.header.Values("Set-Cookie"))
	}

	p = b.post("/console/signin", url.Values{"token": {aliceToken}, "next": {"/console/dead-letters?status=parked"}})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/dead-letters?status=parked", p.header.Get("Location"))
	ck := p.header.Get("Set-Cookie")
	for _, attr := range []string{"console_session=", "Path=/console/", "HttpOnly", "SameSite=Strict", "Max-Age=3600", "Expires="} {
		require.Contains(t, ck, attr)
	}
	// An outside "next" is not followed.
	p = b.post("/console/signin", url.Values{"token": {aliceToken}, "next": {"//evil.example/"}})
	require.Equal(t, "/console/", p.header.Get("Location"))

	p = b.get("/console/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "alice")
	require.Equal(t, "no-store", p.header.Get("Cache-Control"))
	require.Contains(t, p.header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Equal(t, "text/html; charset=utf-8", p.header.Get("Content-Type"))

	// Sign-out needs its CSRF token too; then the session is gone.
	p = b.post("/console/signout", url.Values{})
	require.Equal(t, http.StatusForbidden, p.status)
	p = b.post("/console/signout", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, http.StatusSeeOther, b.get("/console/").status)
}

func TestConsoleSessionExpiresAndIsSharedByReplicas(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	require.Equal(t, http.StatusOK, b.signIn(bobToken).status)

	// Another replica with the same tokens (listed in another order)
	// accepts the session; one whose tokens differ does not.
	u, _ := url.Parse(w.srv.URL)
	cookies := b.hc.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/console/"})
	require.Len(t, cookies, 1)
	replica := func(ops ...Operator) int {
		srv := New(Config{})
		require.NoError(t, srv.MountConsole(ConsoleConfig{Operators: ops, DB: w.db.DB, Now: w.clock.now}))
		req := httptest.NewRequest("GET", "/console/runs", nil)
		req.AddCookie(cookies[0])
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, replica(Operator{"bob", bobToken}, Operator{"alice", aliceToken}))
	require.Equal(t, http.StatusSeeOther, replica(Operator{"bob", bobToken}, Operator{"alice", "alice-new-token-000000"}))
	require.Equal(t, http.StatusSeeOther, replica(Operator{"alice", aliceToken}), "bob's token was removed")

	w.clock.add(59 * time.Minute)
	require.Equal(t, http.StatusOK, b.get("/console/").status)
	w.clock.add(2 * time.Minute)
	p := b.get("/console/tasks")
	require.Equal(t, http.StatusSeeOther, p.status)
	loc, err := url.Parse(p.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/console/signin", loc.Path)
	require.Equal(t, "/console/tasks", loc.Query().Get("next"))
	require.Equal(t, "expired", loc.Query().Get("why"))
	require.Contains(t, b.get(p.header.Get("Location")).body, "your session expired")
	// A forged or altered cookie goes to sign-in as well.
	req := httptest.NewRequest("GET", "/console/", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: strings.Replace(cookies[0].Value, "Y", "Z", 1)})
	rec := httptest.NewRecorder()
	w.srv.Config.Handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code)
}

// Every page renders on the fixture, and bad input gets the answer it
// should: 404 for what does not exist, 400 naming the filter at fault.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	ov := b.signIn(aliceToken)
	require.Equal(t, http.StatusOK, ov.status, ov.body)
	require.NotContains(t, b.get("/console/fulfilment").body, "does not run on a declared shop schema")
	// O-1 is unpaid and overdue, but its parked letter holds it back.
	require.Contains(t, ov.body, `<dt>due now, not held back by a dead letter</dt><dd><a href="/console/runs">0</a></dd>`)
	for _, want := range []string{"Orders due to close", `href="/console/dead-letters?status=parked">2</a>`,
		`href="/console/tasks?status=FAILED">1</a>`, "Fulfilment overdue", "xxl-job log 41", "1.5s", "scanned=5 closed=5"} {
		require.Contains(t, ov.body, want)
	}

	for path, want := range map[string][]string{
		"/console/dead-letters":                                                {"O-1", "W-1", "R-1"},
		"/console/dead-letters?status=parked":                                  {"O-1", "Requeue every letter matching"},
		"/console/dead-letters?status=parked&since=90m&error=script":           {"boom &lt;script&gt;"},
		"/console/dead-letters?status=resolved":                                {"R-1"},
		"/console/dead-letters/" + itoa(w.ids["O-1"]):                          {"inventory row of sku 5 is missing", "Requeue this letter", "Coupon", "locked", "Items"},
		"/console/orders/O-2":                                                  {"payment_timeout", "Close log"},
		"/console/orders/O-1":                                                  {"O-1", "100", "locked"},
		"/console/tasks":                                                       {"task-failed", "task-pending", "task-done"},
		"/console/tasks?status=FAILED":                                         {"task-failed", "handler: boom"},
		"/console/tasks?handler=orderTimeoutClose&status=PENDING":              {"task-pending"},
		"/console/tasks/task-failed":                                           {"Requeue", "Cancel", "handler: boom", "O-1"},
		"/console/fulfilment":                                                  {"O-3", "not shipped"},
		"/console/fulfilment?open=true&since=2h":                               {"O-3"},
		"/console/runs":                                                        {"xxl-job log 41", "h1"},
		"/console/static/style.css":                                            {"--accent"},
		"/console/dead-letters?status=parked&after=" + url.QueryEscape("99~1"): {"not a list position"},
	} {
		p := b.get(path)
		if strings.Contains(path, "after=") {
			require.Equal(t, http.StatusBadRequest, p.status, path)
		} else {
			require.Equal(t, http.StatusOK, p.status, "%s: %s", path, p.body)
		}
		for _, s := range want {
			require.Contains(t, p.body, s, path)
		}
	}
	// Only the matching rows.
	// Matched as rendered (a link to the order), since the page also
	// carries a random CSRF token that may contain any short string.
	parked := b.get("/console/dead-letters?status=parked").body
	require.NotContains(t, parked, ">W-1</a>")
	require.Contains(t, parked, ">O-1</a>")
	failed := b.get("/console/tasks?status=FAILED").body
	require.NotContains(t, failed, "task-pending")
	// Keyset paging: the second page continues after the first.
	page1 := b.get("/console/tasks?limit=1")
	require.Equal(t, http.StatusBadRequest, page1.status, "limit is not a console filter")

	for path, want := range map[string]struct {
		status int
		text   string
	}{
		"/console/dead-letters/999999":                          {404, "dead letter 999999"},
		"/console/dead-letters/abc":                             {400, "id: id &#34;abc&#34; is not a positive integer"},
		"/console/orders/NOPE":                                  {404, "order NOPE"},
		"/console/tasks/nope":                                   {404, "No delayed task with bizUuid nope"},
		"/console/nowhere":                                      {404, "no console page"},
		"/console/dead-letters?status=lost":                     {400, "status: status &#34;lost&#34; is not waiting, parked or resolved"},
		"/console/dead-letters?stauts=parked":                   {400, "stauts: unknown filter"},
		"/console/dead-letters?status=parked&error=boom":        {400, "error: error text needs a time range"},
		"/console/dead-letters?since=1h":                        {400, "status: a time range needs a status"},
		"/console/dead-letters?status=parked&since=soon":        {400, "since: since &#34;soon&#34; is neither"},
		"/console/dead-letters?status=parked&since=1h&until=2h": {400, "until: until must be after since"},
		"/console/tasks?status=LOST":                            {400, "status:"},
		"/console/fulfilment?open=maybe":                        {400, "open: open &#34;maybe&#34;"},
		"/console/runs?after=x":                                 {400, "after:"},
	} {
		p := b.get(path)
		require.Equal(t, want.status, p.status, "%s: %s", path, p.body)
		require.Contains(t, p.body, want.text, path)
	}
}

// Keyset paging walks every row once, newest first, with no OFFSET.
func TestConsoleListPaging(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	_, err := w.db.Exec(`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at, updated_at)
		SELECT CONCAT('P-', seq), 'close', 'parked', IF(seq % 10 = 0, 'needle', 'hay'), 8, NOW(3), NOW(3) - INTERVAL seq SECOND FROM seq_1_to_130`)
	require.NoError(t, err)
	b := w.browser(t)
	b.signIn(aliceToken)
	seen := map[string]bool{}
	next := "/console/dead-letters?status=parked"
	pages := 0
	for next != "" {
		p := b.get(next)
		require.Equal(t, http.StatusOK, p.status, p.body)
		for _, m := range regexp.MustCompile(`/console/orders/(P-\d+)"`).FindAllStringSubmatch(p.body, -1) {
			require.False(t, seen[m[1]], "%s twice", m[1])
			seen[m[1]] = true
		}
		next = ""
		if m := regexp.MustCompile(`href="(/console/dead-letters\?[^"]*after=[^"]*)">next page`).FindStringSubmatch(p.body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
		pages++
	}
	require.Len(t, seen, 130)
	require.Equal(t, 3, pages)
	// The error text is a row filter within the status and time range.
	p := b.get("/console/dead-letters?status=parked&since=1h&error=needle")
	require.Equal(t, 13, strings.Count(p.body, `<td class="status-parked">`), p.body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Sign-out revokes the session in the database: the old cookie and its
// CSRF token stop working at once, on this executor and on another one.
// Before, they kept working (a requeue went through) until the expiry.
func TestConsoleSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	require.Equal(t, http.StatusOK, b.signIn(aliceToken).status)
	csrf := b.csrf()
	u, _ := url.Parse(w.srv.URL)
	cookies := b.hc.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/console/"})
	require.Len(t, cookies, 1)
	old := cookies[0]

	p := b.post("/console/signout", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	var n int
	require.NoError(t, w.db.Get(&n, `SELECT COUNT(*) FROM console_session_revoked`))
	require.Equal(t, 1, n)

	// The old cookie, replayed as a copy kept elsewhere would be.
	requeue := "/console/dead-letters/" + itoa(w.ids["O-1"]) + "/requeue"
	replay := func(h http.Handler, method, path string, form url.Values) *httptest.ResponseRecorder {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(old)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	replica := New(Config{})
	require.NoError(t, replica.MountConsole(ConsoleConfig{Operators: []Operator{{"bob", bobToken}, {"alice", aliceToken}},
		Session: time.Hour, DB: w.db.DB, Now: w.clock.now}))
	for name, h := range map[string]http.Handler{"this executor": w.srv.Config.Handler, "another executor": replica} {
		rec := replay(h, "GET", "/console/dead-letters", nil)
		require.Equal(t, http.StatusSeeOther, rec.Code, name)
		require.Contains(t, rec.Header().Get("Location"), "why=signed-out", name)
		rec = replay(h, "POST", requeue, url.Values{"csrf": {csrf}, "confirm": {"yes"}})
		require.Equal(t, http.StatusSeeOther, rec.Code, "%s: %s", name, rec.Body.String())
		rec = replay(h, "POST", "/console/signout", url.Values{"csrf": {csrf}})
		require.Equal(t, http.StatusForbidden, rec.Code, name)
	}
	var status string
	require.NoError(t, w.db.Get(&status, `SELECT status FROM order_dead_letter WHERE order_no = 'O-1'`))
	require.Equal(t, "parked", status, "the revoked session's requeue did nothing")
	require.Contains(t, b.get("/console/signin?why=signed-out").body, "this session was signed out")

	// Signing in again works, and a revocation is purged after its expiry.
	require.Equal(t, http.StatusOK, b.signIn(aliceToken).status)
	w.clock.add(2 * time.Hour)
	require.Equal(t, http.StatusOK, b.signIn(aliceToken).status)
	require.Equal(t, http.StatusSeeOther, b.post("/console/signout", url.Values{"csrf": {b.csrf()}}).status)
	require.NoError(t, w.db.Get(&n, `SELECT COUNT(*) FROM console_session_revoked`))
	require.Equal(t, 1, n, "the first revocation outlived its session and was purged")
}
