package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/orderlock"
)

// logLines returns serve's JSON process-log records.
func (p *serveProcess) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(p.stdout.String(), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

var summaryRe = regexp.MustCompile(`^scanned=(\d+) closed=(\d+) skipped_paid=(\d+) skipped_locked=(\d+) dead_lettered=(\d+) seconds=`)

// The acceptance test of the metrics: a real close run (real MariaDB and
// Redis, real orders, triggered through the admin protocol), then /metrics
// must show exactly what the run reported: scanned, closed, skipped for each
// reason, dead-lettered, one lateness per closed order, the locks taken and
// the one held elsewhere; the run itself by handler and result; the sampled
// gauges the state left behind; and every process-log line the run wrote
// carries its job_id and log_id.
func TestServeMetricsMatchTheRun(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	// Twelve due orders; four more cannot be closed (SKU 7 has no stock
	// row), and one of the twelve is locked by "a payment in progress";
	// paid and not-due orders beside them.
	const victims, held = 4, "DUE-5"
	var placed []ordertest.OrderOpts
	for i := range 12 {
		placed = append(placed, ordertest.OrderOpts{OrderNo: fmt.Sprintf("DUE-%d", i), Age: time.Hour, Coupon: i%3 == 0,
			Items: []ordertest.Item{{SKU: int64(1 + i%4), Qty: 1}}})
	}
	for i := range victims {
		placed = append(placed, ordertest.OrderOpts{OrderNo: fmt.Sprintf("SKU7-%d", i), Age: time.Hour,
			Items: []ordertest.Item{{SKU: 7, Qty: 1, MissingStock: true}, {SKU: 1, Qty: 2}}})
	}
	for i := range 2 {
		placed = append(placed, ordertest.OrderOpts{OrderNo: fmt.Sprintf("PAID-%d", i), Status: 1, Items: []ordertest.Item{{SKU: 2, Qty: 1}}},
			ordertest.OrderOpts{OrderNo: fmt.Sprintf("NEW-%d", i), Items: []ordertest.Item{{SKU: 3, Qty: 1}}})
	}
	for _, o := range placed {
		ordertest.Order(t, db.DB, o)
	}
	before, err := ordertest.Counts(ctx, db.DB)
	require.NoError(t, err)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix, TTL: time.Minute})
	require.NoError(t, err)
	mu := locker.Redsync().NewMutex(locker.KeyFor(held))
	require.NoError(t, mu.LockContext(ctx))
	defer func() { _, _ = mu.UnlockContext(ctx) }()

	p := startServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{"LOG_LEVEL": "debug"})
	_, _, cb := p.closeRun(t, 9001)
	require.Equal(t, 500, cb.HandleCode, "dead letters fail the run: %s", cb.HandleMsg)
	m := summaryRe.FindStringSubmatch(cb.HandleMsg)
	require.NotNil(t, m, cb.HandleMsg)
	n := func(i int) float64 { v, _ := strconv.Atoi(m[i]); return float64(v) }
	scanned, closed, paid, locked, dead := n(1), n(2), n(3), n(4), n(5)
	require.Equal(t, float64(before.Due), scanned)
	require.Equal(t, float64(victims), dead)
	require.Equal(t, 1.0, locked)
	require.Equal(t, scanned-dead-locked-paid, closed)

	var s metricstest.Samples
	require.Eventually(t, func() bool { // the callback and the first heartbeat are counted just after the admin answered
		s = metricstest.Scrape(t, p.apiURL+"/metrics")
		v, _ := s.Value(metrics.XXLCallbackResultsTotal, "result", "ok")
		beats, _ := s.Value(metrics.XXLRegistryHeartbeatsTotal, "result", "ok")
		return v == 1 && beats > 0
	}, 10*time.Second, 20*time.Millisecond)
	get := func(name string, labels ...string) float64 {
		t.Helper()
		v, ok := s.Value(name, labels...)
		require.True(t, ok, "no series %s%v in /metrics", name, labels)
		return v
	}
	run := []string{"handler", "orderTimeoutCloseJob", "shard", "0"}
	require.Equal(t, scanned, get(metrics.OrdersScannedTotal, run...))
	require.Equal(t, closed, get(metrics.OrdersClosedTotal, run...))
	require.Equal(t, dead, get(metrics.OrdersFailedTotal, run...))
	require.Equal(t, paid, get(metrics.OrdersSkippedTotal, append(run, "reason", "paid")...))
	require.Equal(t, locked, get(metrics.OrdersSkippedTotal, append(run, "reason", "locked")...))
	require.Equal(t, scanned-closed-dead-paid-locked, s.Sum(metrics.OrdersSkippedTotal, append(run, "reason", "closed")...)+
		s.Sum(metrics.OrdersSkippedTotal, append(run, "reason", "not_due")...))
	require.Equal(t, closed, get(metrics.OrdersLatenessSeconds+"_count", "handler", "orderTimeoutCloseJob"), "one lateness per closed order")
	require.Equal(t, scanned-locked, get(metrics.OrdersLockKeysTotal, "result", "acquired"))
	require.Equal(t, locked, get(metrics.OrdersLockKeysTotal, "result", "taken"))
	require.Equal(t, 0.0, get(metrics.OrdersLockKeysTotal, "result", "error"))
	require.Positive(t, get(metrics.OrdersLockAcquireSeconds+"_count"))

	require.Equal(t, 1.0, get(metrics.XXLRunsTotal, "handler", "orderTimeoutCloseJob", "result", "fail"))
	require.Equal(t, 1.0, get(metrics.XXLRunDurationSeconds+"_count", "handler", "orderTimeoutCloseJob"))
	require.Equal(t, 0.0, get(metrics.XXLRunsInProgress, "handler", "orderTimeoutCloseJob"))
	require.Positive(t, get(metrics.XXLRegistryHeartbeatsTotal, "result", "ok"))
	require.InDelta(t, float64(time.Now().Unix()), get(metrics.XXLRegistryLastSuccess), 60)
	require.Equal(t, 0.0, get(metrics.XXLCallbackSpoolResults))
	require.Equal(t, 0.0, get(metrics.XXLCallbackQueueLength))

	// The gauges sampled from MySQL: the locked order is left overdue, the
	// dead letters wait for their retry.
	unit := []string{"source", "default", "table", "order_info"}
	require.Equal(t, 1.0, get(metrics.OrdersOverdueUnpaid, unit...))
	require.Positive(t, get(metrics.OrdersOverdueOldestAge, unit...))
	require.Equal(t, dead, get(metrics.OrdersDeadLetters, "stage", "close", "status", "waiting"))
	require.Equal(t, 0.0, get(metrics.OrdersDeadLetters, "stage", "close", "status", "parked"))
	require.Equal(t, 0.0, get(metrics.DelayTasks, "source", "default", "status", "PENDING"))
	require.Positive(t, get("go_sql_open_connections", "source", "default", "db_name", "orders"))

	// Nothing served that alerts and dashboards could not know of.
	names := map[string]bool{}
	for _, n := range metrics.New(metrics.Config{}).Names() {
		names[n] = true
	}
	for name := range s.Names() {
		require.True(t, names[name], "served %s, which metrics.Names does not list", name)
	}

	// The run's process-log lines carry its job id and log id; every line
	// of the close path was written inside the run.
	var closeLines int
	for _, l := range p.logLines(t) {
		if c, _ := l["component"].(string); c != "orders.closer" {
			continue
		}
		closeLines++
		require.Equal(t, 7.0, l["job_id"], "%v", l)
		require.Equal(t, 9001.0, l["log_id"], "%v", l)
	}
	require.Greater(t, closeLines, 2, "the summary, the page lines and the dead-letter warnings")

	// A delayed task whose order cannot be closed: the attempt and the
	// close path are counted under "delay", and the closer's warning about
	// it carries the task's trace id.
	const rt = "RT-1"
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: rt, Age: time.Hour, Items: []ordertest.Item{{SKU: 99, Qty: 1, MissingStock: true}}})
	body := fmt.Sprintf(`{"bizUuid":"close-%s","handler":"orderTimeoutClose","delayMs":0,"maxRetry":0,"payload":{"orderNo":%q}}`, rt, rt)
	req, _ := http.NewRequest(http.MethodPost, p.apiURL+"/api/delay-tasks", strings.NewReader(body))
	req.Header.Set("X-Executor-Token", "api-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	traceID := resp.Header.Get("X-Trace-Id")
	require.NotEmpty(t, traceID)
	require.Eventually(t, func() bool {
		s = metricstest.Scrape(t, p.apiURL+"/metrics")
		v, _ := s.Value(metrics.DelayAttemptsTotal, "handler", "orderTimeoutClose", "result", "failed")
		return v == 1
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, 1.0, get(metrics.OrdersFailedTotal, "handler", "delay", "shard", "0"))
	require.Equal(t, 1.0, get(metrics.OrdersScannedTotal, "handler", "delay", "shard", "0"))
	require.Equal(t, 1.0, get(metrics.DelayLatenessSeconds+"_count", "handler", "orderTimeoutClose"))
	var traced bool
	for _, l := range p.logLines(t) {
		if l["component"] == "orders.closer" && l["order_no"] == rt {
			require.Equal(t, traceID, l["trace_id"], "%v", l)
			require.NotContains(t, l, "job_id")
			traced = true
		}
	}
	require.True(t, traced, "the closer logged the dead letter of %s", rt)

	// The probes and /metrics need no token; pprof is off by default.
	resp, err = http.Get(p.apiURL + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEqual(t, http.StatusOK, resp.StatusCode)
}

// /readyz follows its dependencies: it fails while MySQL or Redis is down
// and recovers when they are back, without a restart. Private servers: the
// shared ones are never stopped.
func TestServeReadyzFollowsDependencies(t *testing.T) {
	my := mariadbtest.Start(t, mariadbtest.Options{})
	_, dsn := my.NewDB(t, "readyz")
	rd := redistest.StartServer(t)
	p := startServe(t, dsn, rd.Addr, "readyz:", map[string]string{"DELAY_ENABLED": "false"})

	type ready struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	probe := func(query string) (int, ready) {
		var r ready
		resp, err := http.Get(p.apiURL + "/readyz" + query)
		if err != nil {
			return 0, r
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	waitFor := func(what string, cond func(int, ready) bool) ready {
		t.Helper()
		var last ready
		var code int
		require.Eventually(t, func() bool {
			code, last = probe("")
			return cond(code, last)
		}, 30*time.Second, 50*time.Millisecond, "%s: last /readyz %d %+v", what, code, last)
		return last
	}
	ok := func(code int, r ready) bool { return code == http.StatusOK && r.Ready }

	r := waitFor("ready at start", ok)
	require.Equal(t, map[string]string{"mysql": "ok", "redis": "ok"}, r.Checks, "the registration is not the API port's business")
	// The admin has the registration; the executor records its answer a
	// moment later.
	require.Eventually(t, func() bool { code, _ := probe("?registry=1"); return code == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	_, r = probe("?registry=1")
	require.Equal(t, map[string]string{"mysql": "ok", "redis": "ok", "registry": "ok"}, r.Checks)

	rd.Stop()
	r = waitFor("Redis down", func(code int, r ready) bool { return code == http.StatusServiceUnavailable })
	require.False(t, r.Ready)
	require.NotEqual(t, "ok", r.Checks["redis"])
	require.Equal(t, "ok", r.Checks["mysql"])
	rd.Start()
	waitFor("Redis back", ok)

	my.Stop()
	r = waitFor("MySQL down", func(code int, r ready) bool { return code == http.StatusServiceUnavailable })
	require.NotEqual(t, "ok", r.Checks["mysql"])
	require.Equal(t, "ok", r.Checks["redis"])
	my.Start()
	waitFor("MySQL back", ok)

	// /healthz only says the process is up, whatever its dependencies.
	resp, err := http.Get(p.apiURL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
