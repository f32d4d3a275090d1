package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The binary as operators run it: `executor serve` against a fake admin, the
// real MariaDB and Redis. It registers, runs orderTimeoutCloseJob when the
// admin triggers it, serves the run log, reports the result, answers the
// probes, and on shutdown deregisters.
func TestServeEndToEnd(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 400, SKUs: 50, DueFraction: 0.7, PaidFraction: 0.1, NotDueFraction: 0.2, CouponFraction: 0.3})
	require.NoError(t, err)
	base, err := ordertest.Snapshot(ctx, db.DB)
	require.NoError(t, err)
	before, err := ordertest.Counts(ctx, db.DB)
	require.NoError(t, err)
	require.Positive(t, before.Due)

	admin := xxljobtest.New(t, xxljobtest.Options{Token: "tok-e2e-0123456789abcdef"})
	port, apiPort := freePort(t), freePort(t)
	address := fmt.Sprintf("http://127.0.0.1:%d/", port)
	for k, v := range map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":          admin.URL,
		"XXL_JOB_ACCESS_TOKEN":             "tok-e2e-0123456789abcdef",
		"XXL_JOB_EXECUTOR_PORT":            strconv.Itoa(port),
		"XXL_JOB_EXECUTOR_BINDADDR":        fmt.Sprintf("127.0.0.1:%d", port),
		"XXL_JOB_EXECUTOR_ADDRESS":         address,
		"XXL_JOB_EXECUTOR_LOGPATH":         t.TempDir(),
		"XXL_JOB_EXECUTOR_APPNAME":         "order-job-e2e",
		"MYSQL_DSN":                        db.DSN,
		"REDIS_ADDR":                       redistest.Addr(),
		"ORDER_CLOSE_LOCK_KEY_PREFIX":      prefix,
		"EXECUTOR_API_ADDR":                fmt.Sprintf("127.0.0.1:%d", apiPort),
		"EXECUTOR_API_TOKEN":               "api-token-0123456789",
		"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT": "5s",
	} {
		t.Setenv(k, v)
	}
	var stdout, stderr syncbuf.Buffer
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() { done <- run(sctx, []string{"serve"}, &stdout, &stderr) }()

	regs, err := admin.WaitRegistrations(1, 15*time.Second)
	require.NoError(t, err, "stderr: %s\nstdout: %s", stderr.String(), stdout.String())
	require.Equal(t, xxljobtest.Registry{RegistryGroup: "EXECUTOR", RegistryKey: "order-job-e2e", RegistryValue: address}, regs[0])

	client := xxljobtest.NewClient(address, "tok-e2e-0123456789abcdef", xxljobtest.V24)
	defer client.Close()
	trig := xxljobtest.Trigger(7, "orderTimeoutCloseJob", 9001)
	env, err := client.Run(ctx, trig)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, env.MsgString())
	cb, err := admin.WaitCallback(9001, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.Regexp(t, fmt.Sprintf(`^scanned=%d closed=%d skipped_paid=0 skipped_locked=0 dead_lettered=0 seconds=\d+\.\d{3}$`, before.Due, before.Due), cb.HandleMsg)
	require.NoError(t, ordertest.Check(ctx, db.DB, base))

	_, lr, err := client.Log(ctx, trig.LogDateTime, 9001, 1)
	require.NoError(t, err)
	require.Contains(t, lr.LogContent, "page 1: scanned=")
	require.Contains(t, lr.LogContent, cb.HandleMsg)

	// Probes answer without the API token; other routes need it.
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", apiPort, p))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, p)
	}

	// The real-time path: a delayed task registered over the API port closes
	// a newly due order within moments, through the dispatcher serve started.
	const orderNo = "RT-1"
	ordertest.Order(t, db.DB, ordertest.OrderOpts{OrderNo: orderNo, Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 2}, {SKU: 3, Qty: 1}}})
	base, err = ordertest.Snapshot(ctx, db.DB)
	require.NoError(t, err)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/delay-tasks", apiPort)
	body := fmt.Sprintf(`{"bizUuid":"close-%s","handler":"orderTimeoutClose","delayMs":0,"payload":{"orderNo":%q}}`, orderNo, orderNo)
	req, _ := http.NewRequest(http.MethodPost, apiURL, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API port wants its token")
	req, _ = http.NewRequest(http.MethodPost, apiURL, strings.NewReader(body))
	req.Header.Set("X-Executor-Token", "api-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)
	require.Eventually(t, func() bool {
		var st int
		return db.GetContext(ctx, &st, "SELECT status FROM order_info WHERE order_no = ?", orderNo) == nil && st == 2
	}, 15*time.Second, 20*time.Millisecond, "the delayed task closed the order")
	require.NoError(t, ordertest.Check(ctx, db.DB, base))

	stop()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	rem, err := admin.WaitRemovals(1, time.Second)
	require.NoError(t, err)
	require.Equal(t, address, rem[0].RegistryValue)
	require.NotContains(t, stdout.String()+stderr.String(), "tok-e2e-0123456789abcdef", "the access token is never logged")
	require.NotContains(t, stdout.String()+stderr.String(), "api-token-0123456789")
}
