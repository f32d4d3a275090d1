package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
)

// serve's console offers the order sources: ?source=b reads b's database,
// its delayed tasks and the overview's figures among them (the due orders of
// b's order tables), and looks an order up in b's order tables,
// a is mysql.dsn's.
func TestConsoleReadsEverySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	for _, stmt := range []string{`CREATE TABLE order_info_1 LIKE order_info`, `CREATE TABLE order_item_1 LIKE order_item`,
		`INSERT INTO order_info_1 (order_no, user_id, status, create_time, timeout_minutes) VALUES ('B-7', 1, 2, NOW(), 30),
			('B-8', 1, 0, NOW() - INTERVAL 2 HOUR, 30), ('B-9', 1, 0, NOW() - INTERVAL 1 HOUR, 30)`} {
		_, err := other.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: "B-1", Age: time.Hour})
	ordertest.Order(t, home.DB, ordertest.OrderOpts{OrderNo: "A-1", Age: time.Hour})
	bTasks, err := delay.NewClient(other.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	_, _, err = bTasks.Register(ctx, delay.Registration{BizUUID: "task-b", Handler: "orderTimeoutClose", Delay: time.Hour})
	require.NoError(t, err)
	const token = "alice-token-0123456789"
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, map[string]string{"EXECUTOR_API_CONSOLE_TOKENS": "alice:" + token},
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info, order_info_1"}]`, home.DSN, other.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	get := consoleOf(t, cfg, d, token)
	code, body := get("/console/orders/B-7?source=b")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Found in the order table order_info_1 of order source b.")
	code, _ = get("/console/orders/B-7?source=a")
	require.Equal(t, http.StatusNotFound, code)
	code, body = get("/console/tasks?source=b")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<a href="/console/tasks/task-b?source=b">task-b</a>`)
	code, body = get("/console/tasks?source=a")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, body, "task-b")
	code, body = get("/console/?source=b")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<a href="/console/tasks?status=PENDING&amp;source=b">1</a>`, "b's pending task-b")
	require.Contains(t, body, `<dt>due now, not held back by a dead letter</dt><dd class="warn"><a href="/console/runs?source=b">3</a>`, "b's due orders of both its tables")
	require.Contains(t, body, `<dt>oldest due for</dt><dd><a href="/console/runs?source=b">1h30m</a>`, "B-8's")
	require.NotContains(t, body, "Could not read")
	for _, path := range []string{"/console/", "/console/?source=a"} {
		code, body = get(path)
		require.Equal(t, http.StatusOK, code, body)
		require.Regexp(t, `<dt>due now, not held back by a dead letter</dt><dd class="warn"><a href="/console/runs[^"]*">1</a>`, body, "%s: a's A-1", path)
	}
	code, body = get("/console/dead-letters?source=c")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "(the sources: a, b)")
}

// The console reads a declared schema's (order.schema.table) own order
// table, not the executor's order_info: the overview counts the due orders
// of the close's units on it, and the order view looks its orders up there.
func TestConsoleReadsDeclaredTable(t *testing.T) {
	t.Parallel()
	db := foreignShop(t)
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: "O-1"}) // in order_info, not due
	get := declaredConsole(t, db, ordertest.ForeignYAML)
	code, body := get("/console/")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<dt>due now, not held back by a dead letter</dt><dd class="warn"><a href="/console/runs">2</a>`, "SN-1 and SN-2")
	require.NotContains(t, body, "Could not read")
	code, body = get("/console/orders/SN-1")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Found in the order table t_order.")
	require.Contains(t, body, "<dt>Status</dt><dd>unpaid (0)</dd>")
	require.Contains(t, body, `<tr><td>5</td><td class="num">1</td>`, "SN-1's line")
	code, _ = get("/console/orders/O-1")
	require.Equal(t, http.StatusNotFound, code, "order_info is not the shop's order table")
}

// A shop that names its deadline column (order.schema.dueTime): the
// order page shows when the order is due, from that column, not a
// "Created" time that is the deadline and a timeout of 0; a NULL deadline
// reads as never due, not as the year 9999.
func TestConsoleShowsTheDueTimeColumn(t *testing.T) {
	t.Parallel()
	db := foreignShop(t)
	for _, stmt := range []string{
		"ALTER TABLE t_order ADD COLUMN expire_at DATETIME(3) NULL, ADD KEY idx_status_expire (order_status, expire_at, id)",
		"UPDATE t_order SET expire_at = '2026-03-01 10:20:30' WHERE order_sn = 'SN-1'",
	} {
		_, err := db.ExecContext(context.Background(), stmt)
		require.NoError(t, err, stmt)
	}
	yml := strings.NewReplacer("scanIndex: idx_status_created", "scanIndex: idx_status_expire",
		"createTime: created_at", "dueTime: expire_at", "    timeoutColumn: \"\"\n", "", "    timeoutMinutes: 15\n", "").Replace(ordertest.ForeignYAML)
	get := declaredConsole(t, db, yml)
	code, body := get("/console/orders/SN-1")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<dt>Due</dt><dd>2026-03-01 10:20:30")
	require.Contains(t, body, "(expire_at)</dd>")
	require.NotContains(t, body, "<dt>Created</dt>")
	require.NotContains(t, body, "Payment timeout")
	code, body = get("/console/orders/SN-2")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<dt>Due</dt><dd>never (expire_at is NULL)</dd>")
	require.NotContains(t, body, "9999")
}

// foreignShop is a database with ordertest's foreign shop tables and two
// of its orders due an hour ago, SN-1 and SN-2.
func foreignShop(t *testing.T) *dbtest.DB {
	t.Helper()
	db := dbtest.New(t)
	ordertest.ForeignTables(t, db.DB)
	for _, sn := range []string{"SN-1", "SN-2"} {
		ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: sn, Age: time.Hour, Items: []ordertest.Item{{SKU: 5, Qty: 1}}})
	}
	return db
}

// declaredConsole serves the console of db with the configuration file
// yml (a declared schema) and returns a signed-in GET of a path of it.
func declaredConsole(t *testing.T, db *dbtest.DB, yml string) func(path string) (int, string) {
	t.Helper()
	const token = "alice-token-0123456789"
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:", "EXECUTOR_API_CONSOLE_TOKENS": "alice:" + token}
	cfg, err := config.LoadWith([]byte(yml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	d, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return consoleOf(t, cfg, d, token)
}

// apiServerOf opens cfg's dependencies and serves the API port of them
// (without the XXL-JOB side), both closed when t ends.
func apiServerOf(t *testing.T, cfg *config.Config) *httptest.Server {
	t.Helper()
	d, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	srv, err := newAPIServer(cfg, slog.New(slog.DiscardHandler), metrics.New(metrics.Config{SampleInterval: time.Millisecond}), d, nil, nil)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// consoleOf serves d's console and returns a GET of a path of it, signed
// in with token: its status and body.
func consoleOf(t *testing.T, cfg *config.Config, d *Deps, token string) func(path string) (int, string) {
	t.Helper()
	srv := api.New(api.Config{})
	tasks, err := d.sourcedTasks(cfg)
	require.NoError(t, err)
	require.NoError(t, mountConsole(srv, cfg, d, tasks, slog.New(slog.DiscardHandler)))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar}
	res, err := hc.PostForm(hs.URL+"/console/signin", url.Values{"token": {token}})
	require.NoError(t, err)
	res.Body.Close()
	return func(path string) (int, string) {
		res, err := hc.Get(hs.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
}

// serve's JSON API reads every order source's database: ?source=b the
// rows in b's, a (on mysql.dsn's database) and no ?source= the home's.
func TestAPIReadsEverySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	for _, stmt := range []string{
		`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at) VALUES ('B-7', 'close', 'parked', 'boom', 8, NOW(3))`,
		`INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason) VALUES ('wx-b', 'B-7', 5.00, NOW(3), 'late')`,
	} {
		_, err := other.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: order_info}]`, home.DSN, other.DSN)))
	require.NoError(t, err)
	hs := apiServerOf(t, cfg)

	count := func(path, key string) int {
		t.Helper()
		res, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		var m map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&m))
		rows, _ := m[key].([]any)
		return len(rows)
	}
	require.Equal(t, 1, count("/api/dead-letters?source=b", "deadLetters"))
	require.Zero(t, count("/api/dead-letters?source=a", "deadLetters"))
	require.Zero(t, count("/api/dead-letters", "deadLetters"))
	require.Equal(t, 1, count("/api/refunds?source=b", "conflicts"))
	require.Zero(t, count("/api/refunds?source=a", "conflicts"))
	require.Zero(t, count("/api/refunds", "conflicts"))
}
