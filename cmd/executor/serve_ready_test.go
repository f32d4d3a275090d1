package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// readyz returns the status and checks of the API port's /readyz with
// query, asked with the API token, so that a failed check says why.
func readyz(t *testing.T, p *serveProcess, query string) (int, map[string]string) {
	t.Helper()
	return readyzAs(t, p, query, "api-token-0123456789")
}

// readyzAs is readyz asked with token ("" sends none).
func readyzAs(t *testing.T, p *serveProcess, query, token string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.apiURL+"/readyz"+query, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Executor-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var r struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r.Checks
}

// With no admin reachable the API port stays ready (the order service keeps
// registering delayed tasks); only the registration check says so.
func TestServeReadyWithoutAdmin(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES": fmt.Sprintf("http://127.0.0.1:%d/xxl-job-admin", freePort(t)),
	})
	require.Eventually(t, func() bool { code, _ := readyz(t, p, ""); return code == http.StatusOK }, 20*time.Second, 50*time.Millisecond)
	code, checks := readyz(t, p, "?registry=1")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, checks["registry"], "not registered with any admin yet")
	require.Equal(t, "ok", checks["mysql"])
	code, checks = readyzAs(t, p, "?registry=1", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, map[string]string{"mysql": "ok", "redis": "ok", "registry": "failed"}, checks, "why, only with the token")
}

// xxl.job.executor.enabled: false serves the API port and the dispatcher
// without the XXL-JOB side: no protocol port, no registration, one notice.
func TestServeWithXXLJobDisabled(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{"XXL_JOB_EXECUTOR_ENABLED": "false"})
	require.Eventually(t, func() bool { code, _ := readyz(t, p, ""); return code == http.StatusOK }, 20*time.Second, 50*time.Millisecond)
	code, _ := readyz(t, p, "?registry=1")
	require.Equal(t, http.StatusBadRequest, code, "no registration to check")

	// A delayed task registered over the API port runs: the dispatcher is up.
	runDelayTask(t, p, db, "off-1")
	// serve checks an orderTimeoutClose payload at registration.
	req, err := http.NewRequest(http.MethodPost, p.apiURL+"/api/delay-tasks",
		strings.NewReader(`{"bizUuid":"off-2","handler":"orderTimeoutClose","delayMs":0,"payload":{"x":1}}`))
	require.NoError(t, err)
	req.Header.Set("X-Executor-Token", "api-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"field":"payload.orderNo"`)

	conn, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(p.address, "http://"), "/"), time.Second)
	if err == nil {
		conn.Close()
		t.Fatal("the XXL-JOB port is listening although xxl.job.executor.enabled is false")
	}
	require.Empty(t, p.admin.Registrations(), "registered although disabled")
	require.Contains(t, p.stdout.String(), "xxl.job.executor.enabled is false")
}
