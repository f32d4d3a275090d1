package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/schema"
)

// sourcesWorld is a console over two order databases: db0 on mysql.dsn's
// (order H-1 in order_info), db1 another (order S-1 in order_info_1, its
// second table), each with a parked dead letter, a parked outbox event, a
// refund owed (payment pay-H-1, pay-S-1) of its order, a close run whose
// result names it (run of H-1, run of S-1) and a FAILED delayed task
// (task-H-1, task-S-1).
type sourcesWorld struct {
	home, other *dbtest.DB
	b           *browser
	csrf        string
	log         *syncbuf.Buffer // the process log, JSON
}

func newSourcesWorld(t *testing.T) *sourcesWorld {
	t.Helper()
	ctx := context.Background()
	w := &sourcesWorld{home: dbtest.New(t), other: dbtest.New(t), log: &syncbuf.Buffer{}}
	seed := func(db *dbtest.DB, table, no string, stmts ...string) {
		t.Helper()
		for _, stmt := range append(stmts,
			`INSERT INTO `+table+` (order_no, user_id, status, create_time, timeout_minutes) VALUES ('`+no+`', 9, 2, NOW() - INTERVAL 2 HOUR, 30)`,
			`INSERT INTO order_dead_letter (order_no, order_table, stage, status, status_reason, last_error, attempts, next_retry_at)
				VALUES ('`+no+`', '`+table+`', 'close', 'parked', 'parked after 8 failed attempts', 'boom', 8, NOW(3))`,
			`INSERT INTO order_outbox (event_type, order_no, payload, trace_id, status, attempts, next_attempt_at, last_error, park_reason, parked_at, created_at)
				VALUES ('stock.release', '`+no+`', '{}', 't', 'parked', 3, UTC_TIMESTAMP(3), 'status 410', 'permanent answer: status 410', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`,
			`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason) VALUES ('pay-`+no+`', '`+no+`', 5.00, NOW(3), 'late')`,
			`INSERT INTO order_close_run (started_at, finished_at, closed, result, order_table) VALUES (NOW(3), NOW(3), 1, 'run of `+no+`', '`+table+`')`) {
			_, err := db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
	}
	seed(w.home, "order_info", "H-1")
	seed(w.other, "order_info_1", "S-1", `CREATE TABLE order_info_1 LIKE order_info`, `CREATE TABLE order_item_1 LIKE order_item`,
		`INSERT INTO order_item_1 (order_no, sku_id, quantity) VALUES ('S-1', 77, 3)`)

	tasks := func(db *dbtest.DB, biz string) *delay.Client {
		t.Helper()
		c, err := delay.NewClient(db.DB, nil, delay.ClientConfig{})
		require.NoError(t, err)
		_, _, err = c.Register(ctx, delay.Registration{BizUUID: biz, Handler: "orderTimeoutClose", Delay: time.Hour,
			Payload: map[string]string{"orderNo": "O-1"}})
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, `UPDATE job_delay_task SET status = 'FAILED', retry_count = 4 WHERE biz_uuid = ?`, biz)
		require.NoError(t, err)
		return c
	}
	in := func(db *dbtest.DB, tables ...string) *inspect.View {
		i, err := inspect.New(db.DB, orders.CompensateOutbox).InTables(schema.Default(), tables)
		require.NoError(t, err)
		return i.CountingDue(closeUnits(t, db, tables...)...)
	}
	srv := New(Config{Token: "api-token", Logger: slog.New(slog.NewJSONHandler(w.log, nil))})
	require.NoError(t, srv.MountConsole(ConsoleConfig{Operators: []Operator{{"alice", aliceToken}}, Session: time.Hour,
		DB: w.home.DB, Mode: orders.CompensateOutbox, Tasks: tasks(w.home, "task-H-1"), Sources: []ConsoleSource{
			{Name: "db0", DB: w.home.DB, View: in(w.home, "order_info"), Home: true},
			{Name: "db1", DB: w.other.DB, View: in(w.other, "order_info", "order_info_1"), Tasks: tasks(w.other, "task-S-1")}}}))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	w.b = (&consoleWorld{srv: hs}).browser(t)
	w.b.signIn(aliceToken)
	w.csrf = w.b.csrf()
	return w
}

// statusOf reads a letter's status straight from a database.
func statusOf(t *testing.T, db *dbtest.DB, table, orderNo string) string {
	t.Helper()
	var s string
	require.NoError(t, db.GetContext(context.Background(), &s, `SELECT status FROM `+table+` WHERE order_no = ?`, orderNo))
	return s
}

// listOfDB1 gets the list page path (with its filters, without ?source=)
// of db1 and of mysql.dsn's database: db1's links row db1Row, not homeRow,
// selects db1 and keeps it in its filter form; the home's the other way
// round. It returns db1's page.
func (w *sourcesWorld) listOfDB1(t *testing.T, path, db1Row, homeRow string) page {
	t.Helper()
	home := w.b.get(path)
	require.Equal(t, http.StatusOK, home.status, home.body)
	require.Contains(t, home.body, ">"+homeRow+"</a>")
	require.NotContains(t, home.body, db1Row)
	p := w.b.get(path + "&source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, ">"+db1Row+"</a>")
	require.NotContains(t, p.body, homeRow)
	require.Contains(t, p.body, `<option value="db1" selected>db1</option>`)
	require.Contains(t, p.body, `<input type="hidden" name="source" value="db1">`, "the filter form keeps the source")
	return p
}

// taskStatusOf reads a delayed task's status straight from a database.
func taskStatusOf(t *testing.T, db *dbtest.DB, biz string) string {
	t.Helper()
	var s string
	require.NoError(t, db.GetContext(context.Background(), &s, `SELECT status FROM job_delay_task WHERE biz_uuid = ?`, biz))
	return s
}

var letterLinkRe = regexp.MustCompile(`href="/console/dead-letters/(\d+)\?source=db1"`)

// The dead-letter pages read the database of ?source=, name the table
// each letter names, carry the source through their links and forms, and
// requeue in that database only.
func TestConsoleDeadLettersOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.b.get("/console/dead-letters?status=parked")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, ">H-1</a>")
	require.NotContains(t, p.body, "S-1")
	require.Contains(t, p.body, `<option value="" selected>mysql.dsn's</option>`)
	require.Contains(t, p.body, `<option value="db1">db1</option>`)
	require.Contains(t, p.body, "<th>Table</th>")
	require.Contains(t, p.body, `<form class="filters source" method="get" action="/console/dead-letters">
  <input type="hidden" name="status" value="parked">`, "the choice of source keeps the filters")

	p = w.b.get("/console/dead-letters?status=parked&source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.NotContains(t, p.body, "H-1")
	require.Contains(t, p.body, `<a href="/console/orders/S-1?source=db1">S-1</a>`)
	require.Contains(t, p.body, "<td>order_info_1</td>")
	require.Contains(t, p.body, `<option value="db1" selected>db1</option>`)
	require.Contains(t, p.body, `<input type="hidden" name="source" value="db1">`, "the filter form keeps the source")
	require.Contains(t, p.body, `action="/console/dead-letters/requeue?source=db1"`)
	require.Contains(t, p.body, `href="/console/outbox?status=parked&amp;source=db1"`, "the navigation stays in the source")
	m := letterLinkRe.FindStringSubmatch(p.body)
	require.NotNil(t, m, p.body)
	id := m[1]

	p = w.b.get("/console/dead-letters/" + id + "?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<dt>Order table</dt><dd>order_info_1</dd>")
	require.Contains(t, p.body, `action="/console/dead-letters/`+id+`/requeue?source=db1"`)
	require.Contains(t, p.body, "<td>77</td>", "the order's lines, from order_item_1")

	p = w.b.post("/console/dead-letters/"+id+"/requeue?source=db1", url.Values{"csrf": {w.csrf}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "order S-1 in source db1")
	require.Contains(t, p.body, `action="/console/dead-letters/`+id+`/requeue?source=db1"`)
	p = w.b.post("/console/dead-letters/"+id+"/requeue?source=db1", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `href="/console/dead-letters/`+id+`?source=db1"`)
	require.Equal(t, "waiting", statusOf(t, w.other, "order_dead_letter", "S-1"))
	require.Equal(t, "parked", statusOf(t, w.home, "order_dead_letter", "H-1"))
	require.Contains(t, w.log.String(), `"action":"requeue dead letter","target":"S-1","stage":"close","letter_id":`+id+`,"source":"db1"`)

	// The bulk requeue of the home database leaves db1's letters alone.
	p = w.b.post("/console/dead-letters/requeue", url.Values{"csrf": {w.csrf}, "status": {"parked"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, "waiting", statusOf(t, w.home, "order_dead_letter", "H-1"))
	p = w.b.post("/console/dead-letters/requeue?source=db1", url.Values{"csrf": {w.csrf}, "status": {"waiting"}})
	require.Contains(t, p.body, "requeue 1 waiting dead letter(s) in source db1")
	require.Contains(t, p.body, `action="/console/dead-letters/requeue?source=db1"`)
}

// The order view looks an order up in the chosen source's order tables
// and says which one holds it; the search form leads there.
func TestConsoleOrderOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.b.get("/console/orders/S-1")
	require.Equal(t, http.StatusNotFound, p.status, "S-1 is not in mysql.dsn's database")
	require.Contains(t, p.body, "No order S-1")
	p = w.b.get("/console/orders/S-1?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Found in the order table order_info_1 of order source db1.")
	require.Contains(t, p.body, "<dt>Order table</dt><dd>order_info_1</dd>")
	require.Contains(t, p.body, `href="/console/outbox/`)
	require.Regexp(t, `href="/console/outbox/\d+\?source=db1"`, p.body, "its events link into the source")
	require.Regexp(t, `href="/console/dead-letters/\d+\?source=db1"`, p.body)
	p = w.b.get("/console/orders/H-1?source=db1")
	require.Equal(t, http.StatusNotFound, p.status)
	require.Contains(t, p.body, "No order H-1 in source db1")
	p = w.b.get("/console/orders/H-1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Found in the order table order_info.")

	p = w.b.get("/console/orders?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "the 2 order tables order_info … order_info_1 of order source db1")
	require.Contains(t, p.body, `<input type="hidden" name="source" value="db1">`)
	p = w.b.get("/console/orders?orderNo=S-1&source=db1")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/orders/S-1?source=db1", p.header.Get("Location"))
}

// An order number not in the chosen database is looked up in the other
// order sources: the page links to the one holding it, keeps the choice of
// source and leads back to the overview of the source it was asked in.
func TestConsoleOrderInAnotherSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.b.get("/console/orders/S-1")
	require.Equal(t, http.StatusNotFound, p.status, p.body)
	require.Contains(t, p.body, "<h1>No order S-1</h1>")
	require.Contains(t, p.body, "Looked in the order table order_info.")
	require.Contains(t, p.body, `It is in <a href="/console/orders/S-1?source=db1">the order table order_info_1 of order source db1</a>.`)
	require.Contains(t, p.body, `<select name="source">`, "the choice of source stays on the page")

	p = w.b.get("/console/orders/H-1?source=db1")
	require.Equal(t, http.StatusNotFound, p.status, p.body)
	require.Contains(t, p.body, "Looked in the 2 order tables order_info … order_info_1 of order source db1.")
	require.Contains(t, p.body, `It is in <a href="/console/orders/H-1?source=db0">the order table order_info of order source db0</a>.`)
	require.Contains(t, p.body, `<a href="/console/?source=db1">Back to the overview</a>`)
	require.Contains(t, p.body, `<a class="brand" href="/console/?source=db1">`)

	p = w.b.get("/console/orders/NOSUCH?source=db1")
	require.Equal(t, http.StatusNotFound, p.status, p.body)
	require.Contains(t, p.body, "No other order source holds it either (looked in db0).")
	require.NotContains(t, p.body, "It is in")
}

// A session that ended before an action on a source was confirmed goes
// to sign-in and from there back to that source's overview, not to
// mysql.dsn's.
func TestConsoleSignInAfterActionKeepsSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)
	require.Equal(t, http.StatusSeeOther, w.b.post("/console/signout", url.Values{"csrf": {w.csrf}}).status)

	p := w.b.post("/console/dead-letters/requeue?source=db1", url.Values{"csrf": {w.csrf}, "status": {"parked"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	loc, err := url.Parse(p.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/console/signin", loc.Path)
	require.Equal(t, "/console/?source=db1", loc.Query().Get("next"))
	require.Equal(t, "parked", statusOf(t, w.other, "order_dead_letter", "S-1"), "nothing was done")

	p = w.b.post("/console/dead-letters/requeue?source=nope", url.Values{"csrf": {w.csrf}, "status": {"parked"}})
	loc, err = url.Parse(p.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/console/", loc.Query().Get("next"), "a source that is none is not carried on")
}

// The outbox pages read and requeue the events of the chosen source.
func TestConsoleOutboxOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.b.get("/console/outbox?status=parked&source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<a href="/console/orders/S-1?source=db1">S-1</a>`)
	require.NotContains(t, p.body, "H-1")
	m := regexp.MustCompile(`href="/console/outbox/(\d+)\?source=db1"`).FindStringSubmatch(p.body)
	require.NotNil(t, m, p.body)
	p = w.b.get("/console/outbox/" + m[1] + "?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `action="/console/outbox/`+m[1]+`/requeue?source=db1"`)
	p = w.b.post("/console/outbox/"+m[1]+"/requeue?source=db1", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, "pending", statusOf(t, w.other, "order_outbox", "S-1"))
	require.Equal(t, "parked", statusOf(t, w.home, "order_outbox", "H-1"))
	p = w.b.get("/console/outbox?status=parked")
	require.Contains(t, p.body, ">H-1</a>")
}

// The refunds pages read and record the refunds owed of the chosen
// source, in its database only.
func TestConsoleRefundsOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.listOfDB1(t, "/console/refunds?status=owed", "S-1", "H-1")
	require.Contains(t, p.body, `<a href="/console/refunds/pay-S-1?source=db1">pay-S-1</a>`)
	require.Contains(t, p.body, `<a href="/console/orders/S-1?source=db1">S-1</a>`)

	p = w.b.get("/console/refunds/pay-S-1")
	require.Equal(t, http.StatusNotFound, p.status, "pay-S-1 is not in mysql.dsn's database")
	p = w.b.get("/console/refunds/pay-S-1?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `action="/console/refunds/pay-S-1/refunded?source=db1"`)

	p = w.b.post("/console/refunds/pay-S-1/refunded?source=db1", url.Values{"csrf": {w.csrf}, "note": {"r-1"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "record the refund of payment pay-S-1 in source db1")
	require.Contains(t, p.body, `action="/console/refunds/pay-S-1/refunded?source=db1"`)
	p = w.b.post("/console/refunds/pay-S-1/refunded?source=db1", url.Values{"csrf": {w.csrf}, "note": {"r-1"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `href="/console/refunds/pay-S-1?source=db1"`)
	refundStatus := func(db *dbtest.DB, paymentID string) string {
		var st string
		require.NoError(t, db.GetContext(context.Background(), &st, `SELECT refund_status FROM payment_conflict WHERE payment_id = ?`, paymentID))
		return st
	}
	require.Equal(t, "refunded", refundStatus(w.other, "pay-S-1"))
	require.Equal(t, "owed", refundStatus(w.home, "pay-H-1"))
	require.Contains(t, w.log.String(), `"action":"record refund","target":"pay-S-1","order_no":"S-1"`)
	require.Regexp(t, `"target":"pay-S-1",[^\n]*"source":"db1"`, w.log.String())
}

// The close runs page and the overview list the runs recorded in the
// chosen source's database.
func TestConsoleRunsOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	for _, tc := range []struct{ path, has, hasNot string }{
		{"/console/runs?source=db1", "run of S-1", "run of H-1"},
		{"/console/runs", "run of H-1", "run of S-1"},
		{"/console/", "run of H-1", "run of S-1"},
		{"/console/?source=db1", "run of S-1", "run of H-1"},
	} {
		p := w.b.get(tc.path)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Contains(t, p.body, tc.has, tc.path)
		require.NotContains(t, p.body, tc.hasNot, tc.path)
	}
	p := w.b.get("/console/runs?source=db1")
	require.Contains(t, p.body, `<option value="db1" selected>db1</option>`)
	require.Contains(t, p.body, `href="/console/runs?source=db1"`, "the navigation stays in the source")
	// A source's run records are one per order table and run: each names
	// the table it swept.
	require.Contains(t, p.body, "<th>Table</th>")
	require.Contains(t, p.body, "<td>order_info_1</td>")
	p = w.b.get("/console/")
	require.Contains(t, p.body, "<td>order_info</td>")
}

// The delayed-task pages read, requeue and cancel the tasks of the chosen
// source's database, in that database only.
func TestConsoleTasksOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)

	p := w.listOfDB1(t, "/console/tasks?status=FAILED", "task-S-1", "task-H-1")
	require.Contains(t, p.body, `<a href="/console/tasks/task-S-1?source=db1">task-S-1</a>`)
	require.Contains(t, p.body, `href="/console/tasks?status=FAILED&amp;source=db1"`, "the navigation stays in the source")

	p = w.b.get("/console/tasks/task-S-1")
	require.Equal(t, http.StatusNotFound, p.status, "task-S-1 is not in mysql.dsn's database")
	p = w.b.get("/console/tasks/task-H-1?source=db1")
	require.Equal(t, http.StatusNotFound, p.status)
	require.Contains(t, p.body, "No delayed task with bizUuid task-H-1 in source db1")
	p = w.b.get("/console/tasks/task-S-1?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `action="/console/tasks/task-S-1/requeue?source=db1"`)
	require.Contains(t, p.body, `action="/console/tasks/task-S-1/cancel?source=db1"`)

	p = w.b.post("/console/tasks/task-S-1/requeue?source=db1", url.Values{"csrf": {w.csrf}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "requeue task task-S-1 (orderTimeoutClose, now FAILED) in source db1")
	require.Contains(t, p.body, `action="/console/tasks/task-S-1/requeue?source=db1"`)
	require.Contains(t, p.body, `href="/console/tasks/task-S-1?source=db1"`)
	p = w.b.post("/console/tasks/task-S-1/requeue?source=db1", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `href="/console/tasks/task-S-1?source=db1"`)
	require.Equal(t, "PENDING", taskStatusOf(t, w.other, "task-S-1"))
	require.Equal(t, "FAILED", taskStatusOf(t, w.home, "task-H-1"))
	require.Regexp(t, `"action":"requeue delayed task","target":"task-S-1",[^\n]*"source":"db1"`, w.log.String())

	p = w.b.post("/console/tasks/task-S-1/cancel?source=db1", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, "CANCELLED", taskStatusOf(t, w.other, "task-S-1"))
	require.Equal(t, "FAILED", taskStatusOf(t, w.home, "task-H-1"))
}

// The overview's cards count the chosen source's database and link into
// its lists; the fulfilment flags list its flags, each with its order's
// status from the order table the flag names.
func TestConsoleOverviewOfSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)
	ctx := context.Background()
	for _, stmt := range []string{
		`INSERT INTO order_dead_letter (order_no, order_table, stage, status, last_error, attempts, next_retry_at)
			VALUES ('S-2', 'order_info_1', 'close', 'parked', 'boom', 8, NOW(3)), ('S-3', 'order_info_1', 'close', 'parked', 'boom', 8, NOW(3))`,
		`INSERT INTO order_fulfillment_overdue (order_id, order_no, user_id, pay_time, deadline, flagged_at, order_table)
			SELECT id, order_no, 9, NOW(3) - INTERVAL 8 DAY, NOW(3) - INTERVAL 1 DAY, NOW(3), 'order_info_1' FROM order_info_1 WHERE order_no = 'S-1'`,
	} {
		_, err := w.other.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}

	p := w.b.get("/console/?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<a href="/console/dead-letters?status=parked&amp;source=db1">3</a>`, "db1's 3 parked letters")
	require.Contains(t, p.body, `<a href="/console/refunds?status=owed&amp;source=db1">1</a>`)
	require.Contains(t, p.body, `<a href="/console/tasks?status=FAILED&amp;source=db1">1</a>`)
	require.Contains(t, p.body, `<a href="/console/fulfilment?source=db1">1</a>`, "db1's flag")
	require.Contains(t, p.body, `href="/console/runs?source=db1"`)
	require.Contains(t, p.body, `<option value="db1" selected>db1</option>`)
	require.NotContains(t, p.body, "Could not read")
	p = w.b.get("/console/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<a href="/console/dead-letters?status=parked">1</a>`, "mysql.dsn's 1 parked letter")
	require.Contains(t, p.body, `<a href="/console/fulfilment">0</a>`)
	require.NotContains(t, p.body, "source=db1")

	p = w.b.get("/console/fulfilment?source=db1")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<a href="/console/orders/S-1?source=db1">S-1</a>`)
	require.Contains(t, p.body, "<td>status 2</td>", "S-1's status, closed, from its own table order_info_1")
	require.Contains(t, p.body, `<input type="hidden" name="source" value="db1">`, "the filter form keeps the source")
	require.Contains(t, p.body, `href="/console/fulfilment?open=true&amp;source=db1"`, "the navigation stays in the source")
	p = w.b.get("/console/fulfilment")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.NotContains(t, p.body, "S-1")
	require.Contains(t, p.body, "No flag matches")
}

// An unknown source is a 400 page naming the sources; without
// order.sources the pages offer no choice.
func TestConsoleUnknownSource(t *testing.T) {
	t.Parallel()
	w := newSourcesWorld(t)
	for _, path := range []string{"/console/dead-letters?source=nope", "/console/outbox?source=nope",
		"/console/orders/S-1?source=nope", "/console/orders?source=nope", "/console/dead-letters/1?source=nope",
		"/console/refunds?source=nope", "/console/refunds/pay-S-1?source=nope", "/console/runs?source=nope",
		"/console/tasks?source=nope", "/console/tasks/task-S-1?source=nope", "/console/?source=nope",
		"/console/fulfilment?source=nope"} {
		p := w.b.get(path)
		require.Equal(t, http.StatusBadRequest, p.status, path)
		require.Contains(t, p.body, `source: source &#34;nope&#34; is not an order source (the sources: db0, db1)`, path)
	}
	// The refusal's page links nowhere with the unknown name: every such
	// link would be refused again.
	p := w.b.get("/console/?source=nope")
	require.NotContains(t, p.body, "source=nope")
	require.Contains(t, p.body, `<a href="/console/">Back to the overview</a>`)
	p = w.b.post("/console/dead-letters/requeue?source=nope", url.Values{"csrf": {w.csrf}, "status": {"parked"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	p = w.b.post("/console/refunds/pay-S-1/refunded?source=nope", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	p = w.b.post("/console/tasks/task-S-1/cancel?source=nope", url.Values{"csrf": {w.csrf}, "confirm": {"yes"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Equal(t, "FAILED", taskStatusOf(t, w.other, "task-S-1"))
	p = w.b.get("/console/dead-letters?source=" + url.QueryEscape(hostileNo))
	require.Equal(t, http.StatusBadRequest, p.status)
	require.NotContains(t, p.body, "<script>")
	require.Contains(t, p.body, "&lt;script&gt;")

	_, b, _ := signedIn(t)
	p = b.get("/console/dead-letters?status=parked")
	require.Equal(t, http.StatusOK, p.status)
	require.NotContains(t, p.body, `name="source"`)
	require.NotContains(t, p.body, "<th>Table</th>")
	require.Equal(t, http.StatusOK, b.get("/console/dead-letters?source=default").status)
	require.Equal(t, http.StatusBadRequest, b.get("/console/dead-letters?source=db1").status)
}

// closeUnits are Closers of the close on db's order tables, the units
// whose due orders the overview counts.
func closeUnits(t *testing.T, db *dbtest.DB, tables ...string) []inspect.Unit {
	t.Helper()
	rdb, _ := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb})
	require.NoError(t, err)
	var units []inspect.Unit
	for _, table := range tables {
		sch, err := schema.Default().ForTable(table)
		require.NoError(t, err)
		c, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{Schema: sch})
		require.NoError(t, err)
		units = append(units, c)
	}
	return units
}
