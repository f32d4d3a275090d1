package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// The binary as operators run it: `executor serve` against a fake admin, the
// real MariaDB and Redis. It registers, runs orderTimeoutCloseJob when the
// admin triggers it, serves the run log, reports the result, answers the
// probes, and on shutdown deregisters.
func TestServeEndToEnd(t *testing.T) {
	ctx := context.Background()
	db, prefix, base, before := seededDB(t, orderdemo.Spec{Orders: 400, SKUs: 50, DueFraction: 0.7, PaidFraction: 0.1, NotDueFraction: 0.2, CouponFraction: 0.3})
	require.Positive(t, before.Due)

	sv := startServe(t, db.DSN, redistest.Addr(), prefix, nil)
	regs := sv.admin.Registrations()
	require.Equal(t, xxljobtest.Registry{RegistryGroup: "EXECUTOR", RegistryKey: serveAppName, RegistryValue: sv.address}, regs[0])

	client, trig, cb := sv.closeRun(t, 9001)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.Regexp(t, fmt.Sprintf(`^scanned=%d closed=%d skipped_paid=0 skipped_locked=0 dead_lettered=0 seconds=\d+\.\d{3}$`, before.Due, before.Due), cb.HandleMsg)
	require.NoError(t, ordertest.Check(ctx, db.DB, base))

	_, lr, err := client.Log(ctx, trig.LogDateTime, 9001, 1)
	require.NoError(t, err)
	require.Contains(t, lr.LogContent, "page 1: scanned=")
	require.Contains(t, lr.LogContent, cb.HandleMsg)

	// Probes answer without the API token; other routes need it.
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(sv.apiURL + p)
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
	apiURL := sv.apiURL + "/api/delay-tasks"
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

	sv.shutdown(t)
	rem, err := sv.admin.WaitRemovals(1, time.Second)
	require.NoError(t, err)
	require.Equal(t, sv.address, rem[0].RegistryValue)
	require.NotContains(t, sv.stdout.String()+sv.stderr.String(), serveToken, "the access token is never logged")
	require.NotContains(t, sv.stdout.String()+sv.stderr.String(), "api-token-0123456789")
}
