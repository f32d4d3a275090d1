package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/redistest"
)

// delayBundle is one delayed-task test's database and Redis prefix.
type delayBundle struct {
	db     *dbtest.DB
	rdb    *redis.Client
	prefix string
}

func setupDelay(t *testing.T) *delayBundle {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	return &delayBundle{db: dbtest.New(t), rdb: rdb, prefix: prefix}
}

// dispatcher builds a dispatcher with the given handlers, timings small
// enough for tests and, with cfg, other settings.
func (b *delayBundle) dispatcher(t *testing.T, handlers map[string]delay.HandlerFunc, cfg func(*delay.Config)) *delay.Dispatcher {
	t.Helper()
	c := delay.Config{
		KeyPrefix: b.prefix, Handlers: handlers,
		RunningTimeout: 5 * time.Second, HandlerTimeout: 2 * time.Second,
		ReconcileInterval: time.Hour, PollInterval: 20 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, SweepGrace: time.Millisecond,
		Workers: 8,
	}
	if cfg != nil {
		cfg(&c)
	}
	d, err := delay.NewDispatcher(b.db.DB, b.rdb, c)
	require.NoError(t, err)
	return d
}

// start starts d and stops it when the test ends.
func start(t *testing.T, d *delay.Dispatcher) { t.Helper(); delaytest.Start(t, d) }

func (b *delayBundle) task(t *testing.T, biz string) *delay.Task {
	t.Helper()
	c, err := delay.NewClient(b.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	tk, err := c.Get(context.Background(), biz)
	require.NoError(t, err)
	return tk
}

func (b *delayBundle) waitStatus(t *testing.T, biz string, want delay.Status) {
	t.Helper()
	delaytest.WaitStatus(t, b.db, biz, string(want))
}

func (b *delayBundle) countStatus(t *testing.T, st delay.Status) int {
	t.Helper()
	return delaytest.CountStatus(t, b.db, string(st))
}

func noopTask(context.Context, *delay.Task) error { return nil }

// apiServer mounts the API on the real API port (token check, body limit)
// behind an httptest server.
func apiServer(t *testing.T, b *delayBundle) (*httptest.Server, *delay.Dispatcher) {
	t.Helper()
	d := b.dispatcher(t, map[string]delay.HandlerFunc{"noop": noopTask, delay.OrderTimeoutCloseHandler: noopTask}, nil)
	srv := New(Config{Token: "tok"})
	srv.MountDelayTasks(d.Client())
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		hs.Client().CloseIdleConnections()
	})
	return hs, d
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, hs *httptest.Server, method, path, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Executor-Token", "tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := hs.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func TestAPIRegisterGetCancel(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	hs, _ := apiServer(t, b)

	body := `{"bizUuid":"order-timeout-1001","handler":"orderTimeoutClose","delayMs":60000,"payload":{"orderNo":"1001"},"maxRetry":5}`
	a := call(t, hs, "POST", "/api/delay-tasks", body)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	trace := a.body["traceId"].(string)
	require.Len(t, trace, 32)
	require.Equal(t, trace, a.header.Get("X-Trace-Id"))
	require.Equal(t, "/api/delay-tasks/order-timeout-1001", a.header.Get("Location"))
	require.Equal(t, "PENDING", a.body["status"])
	require.EqualValues(t, 5, a.body["maxRetry"])
	require.Equal(t, map[string]any{"orderNo": "1001"}, a.body["payload"])

	// Same bizUuid again: same task, same trace id, nothing changed.
	again := call(t, hs, "POST", "/api/delay-tasks",
		`{"bizUuid":"order-timeout-1001","handler":"noop","executeTime":"2027-01-02T15:04:05+08:00"}`)
	require.Equal(t, http.StatusOK, again.status, again.raw)
	require.Equal(t, trace, again.body["traceId"])
	require.Equal(t, a.body["executeTime"], again.body["executeTime"])
	require.Equal(t, "orderTimeoutClose", again.body["handler"])

	got := call(t, hs, "GET", "/api/delay-tasks/order-timeout-1001", "")
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, trace, got.body["traceId"])

	// RFC 3339 with an offset is stored as the same instant (UTC).
	at := call(t, hs, "POST", "/api/delay-tasks", `{"bizUuid":"abs-1","handler":"noop","executeTime":"2027-01-02T15:04:05.250+08:00"}`)
	require.Equal(t, http.StatusCreated, at.status, at.raw)
	require.Equal(t, "2027-01-02T07:04:05.25Z", at.body["executeTime"])

	c := call(t, hs, "DELETE", "/api/delay-tasks/order-timeout-1001", "")
	require.Equal(t, http.StatusOK, c.status, c.raw)
	require.Equal(t, "CANCELLED", c.body["status"])

	list := call(t, hs, "GET", "/api/delay-tasks?status=cancelled", "")
	require.Equal(t, http.StatusOK, list.status, list.raw)
	tasks := list.body["tasks"].([]any)
	require.Len(t, tasks, 1)

	stats := call(t, hs, "GET", "/api/delay-tasks/stats", "")
	require.Equal(t, http.StatusOK, stats.status, stats.raw)
	require.EqualValues(t, 1, stats.body["counts"].(map[string]any)["CANCELLED"])
	require.Equal(t, "5s", stats.body["runningTimeout"])

	check := call(t, hs, "GET", "/api/delay-tasks/check", "")
	require.Equal(t, http.StatusOK, check.status, check.raw)
	require.Equal(t, true, check.body["ok"])

	rq := call(t, hs, "POST", "/api/delay-tasks/abs-1/requeue", "")
	require.Equal(t, http.StatusConflict, rq.status, rq.raw)
	require.Equal(t, "PENDING", rq.body["task"].(map[string]any)["status"])

	// The port's token check applies.
	resp, err := hs.Client().Get(hs.URL + "/api/delay-tasks/abs-1")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestAPICancelAfterFiringConflicts(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	hs, d := apiServer(t, b)
	start(t, d)
	a := call(t, hs, "POST", "/api/delay-tasks", `{"bizUuid":"fired-1","handler":"noop","delayMs":0}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	b.waitStatus(t, "fired-1", delay.StatusDone)
	c := call(t, hs, "DELETE", "/api/delay-tasks/fired-1", "")
	require.Equal(t, http.StatusConflict, c.status, c.raw)
	require.Contains(t, c.body["error"], "DONE")
	require.Equal(t, "DONE", c.body["task"].(map[string]any)["status"])
}

func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	hs, _ := apiServer(t, b)
	cases := []struct {
		name, method, path, body string
		status                   int
		field, msg               string
	}{
		{"empty body", "POST", "/api/delay-tasks", ``, 400, "", "body is empty"},
		{"not JSON", "POST", "/api/delay-tasks", `{"bizUuid":`, 400, "", "not valid JSON"},
		{"trailing data", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":1} {}`, 400, "", "after the JSON object"},
		{"unknown field", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":1,"delay":5}`, 400, "", `unknown field "delay"`},
		{"missing bizUuid", "POST", "/api/delay-tasks", `{"handler":"noop","delayMs":1}`, 400, "bizUuid", "bizUuid is required"},
		{"missing handler", "POST", "/api/delay-tasks", `{"bizUuid":"a","delayMs":1}`, 400, "handler", "handler is required"},
		{"missing time", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop"}`, 400, "executeTime", "executeTime (RFC 3339) or delayMs is required"},
		{"both times", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":1,"executeTime":"2030-01-01T00:00:00Z"}`, 400, "executeTime", "not both"},
		{"bad time", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","executeTime":"2030-01-01 00:00:00"}`, 400, "executeTime", "not RFC 3339"},
		{"time without zone", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","executeTime":"2030-01-01T00:00:00"}`, 400, "executeTime", "not RFC 3339"},
		{"delay as text", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":"5"}`, 400, "delayMs", "expected int64"},
		{"negative delay", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":-1}`, 400, "delayMs", "negative"},
		{"unknown handler", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"closeEverything","delayMs":1}`, 400, "handler", `unknown handler "closeEverything" (known: noop, orderTimeoutClose`},
		{"unknown service", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"http:nowhere/x","delayMs":1}`, 400, "handler", `service "nowhere" is not configured`},
		{"bad bizUuid", "POST", "/api/delay-tasks", `{"bizUuid":"a b","handler":"noop","delayMs":1}`, 400, "bizUuid", "characters outside"},
		{"maxRetry too big", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":1,"maxRetry":1000}`, 400, "maxRetry", "not in 0..100"},
		{"too far ahead", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","executeTime":"2999-01-01T00:00:00Z"}`, 400, "executeTime", "ahead"},
		{"body too large", "POST", "/api/delay-tasks", `{"bizUuid":"a","handler":"noop","delayMs":1,"payload":"` + strings.Repeat("x", MaxRegistrationBytes) + `"}`, 413, "", "larger than"},
		{"body beyond the port limit", "POST", "/api/delay-tasks", `{"payload":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, "", "larger than"},
		{"unknown task", "GET", "/api/delay-tasks/nope", ``, 404, "bizUuid", `no task with bizUuid "nope"`},
		{"cancel unknown", "DELETE", "/api/delay-tasks/nope", ``, 404, "bizUuid", "no task"},
		{"list bad status", "GET", "/api/delay-tasks?status=LOST", ``, 400, "status", "not one of"},
		{"list bad limit", "GET", "/api/delay-tasks?limit=x", ``, 400, "limit", "not a positive integer"},
		{"list unknown param", "GET", "/api/delay-tasks?state=FAILED", ``, 400, "state", "unknown query parameter"},
	}
	for _, tc := range cases {
		a := call(t, hs, tc.method, tc.path, tc.body)
		require.Equal(t, tc.status, a.status, "%s: %s", tc.name, a.raw)
		require.Equal(t, "application/json; charset=utf-8", a.header.Get("Content-Type"), tc.name)
		require.Contains(t, a.body["error"], tc.msg, tc.name)
		if tc.field != "" {
			require.Equal(t, tc.field, a.body["field"], tc.name)
		}
	}
	require.Zero(t, b.countStatus(t, delay.StatusPending), "nothing was registered")
}

func TestAPIRegistersWithoutRedis(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	c, err := delay.NewClient(b.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	srv := New(Config{Token: "tok"})
	srv.MountDelayTasks(c)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	a := call(t, hs, "POST", "/api/delay-tasks", `{"bizUuid":"r-1","handler":"anything","delayMs":10}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	require.WithinDuration(t, time.Now(), b.task(t, "r-1").ExecuteTime, 5*time.Second)
}

// ?source= picks the order database whose tasks a route reads and
// writes: a registration with ?source=b lands in b's table, the reads of
// b see it and mysql.dsn's (no ?source=) do not; an unknown source is a
// 400 naming the sources.
func TestAPIDelayTasksOfASource(t *testing.T) {
	t.Parallel()
	home, other := setupDelay(t), setupDelay(t)
	hc, err := delay.NewClient(home.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	oc, err := delay.NewClient(other.db.DB, nil, delay.ClientConfig{})
	require.NoError(t, err)
	srv := New(Config{Token: "tok"})
	srv.MountSourcedDelayTasks(Sourced[*delay.Client]{Home: hc, By: map[string]*delay.Client{"a": hc, "b": oc}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	a := call(t, hs, "POST", "/api/delay-tasks?source=b", `{"bizUuid":"s-1","handler":"anything","delayMs":60000}`)
	require.Equal(t, http.StatusCreated, a.status, a.raw)
	require.Equal(t, "s-1", other.task(t, "s-1").BizUUID)
	require.Equal(t, http.StatusOK, call(t, hs, "GET", "/api/delay-tasks/s-1?source=b", "").status)
	require.Equal(t, http.StatusNotFound, call(t, hs, "GET", "/api/delay-tasks/s-1", "").status)
	require.Equal(t, http.StatusNotFound, call(t, hs, "GET", "/api/delay-tasks/s-1?source=a", "").status)
	a = call(t, hs, "GET", "/api/delay-tasks?source=b", "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Len(t, a.body["tasks"], 1)
	a = call(t, hs, "GET", "/api/delay-tasks/stats?source=b", "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.EqualValues(t, 1, a.body["total"])
	a = call(t, hs, "DELETE", "/api/delay-tasks/s-1?source=b", "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "CANCELLED", a.body["status"])

	a = call(t, hs, "GET", "/api/delay-tasks?source=c", "")
	require.Equal(t, http.StatusBadRequest, a.status, a.raw)
	require.Equal(t, "source", a.body["field"])
	require.Equal(t, `source "c" is not an order source (the sources: a, b)`, a.body["error"])
}
