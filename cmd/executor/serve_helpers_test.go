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

// The fake admin's access token and the executor's app name in the serve
// tests.
const (
	serveToken   = "tok-m-0123456789abcdef"
	serveAppName = "order-job-serve"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// seededDB is a fresh database holding the demo data spec describes, and a
// Redis key prefix of the test's own; base and before are the invariants'
// baseline and the counts by status before serve touches the orders.
func seededDB(t *testing.T, spec orderdemo.Spec) (db *dbtest.DB, prefix string, base *ordertest.Baseline, before ordertest.StatusCounts) {
	t.Helper()
	db = dbtest.New(t)
	_, prefix = redistest.Client(t)
	_, err := orderdemo.Generate(context.Background(), db.DB, spec)
	require.NoError(t, err)
	base, err = ordertest.Snapshot(context.Background(), db.DB)
	require.NoError(t, err)
	return db, prefix, base, ordertest.CountsOf(t, db.DB)
}

// serveProcess is `executor serve` running in-process against a fake admin.
type serveProcess struct {
	admin   *xxljobtest.Admin
	address string // the executor's advertised address
	apiURL  string // http://127.0.0.1:{api port}
	stdout  *syncbuf.Buffer
	stderr  *syncbuf.Buffer
	stop    context.CancelFunc
	done    chan int
}

// startServe sets the environment (MySQL at dsn, Redis at redisAddr, lock
// keys under prefix) and starts serve; it waits for the first registration
// and stops serve when the test ends.
func startServe(t *testing.T, dsn, redisAddr, prefix string, extraEnv map[string]string) *serveProcess {
	t.Helper()
	p := launchServe(t, dsn, redisAddr, prefix, extraEnv)
	_, err := p.admin.WaitRegistrations(1, 30*time.Second)
	require.NoError(t, err, "stderr: %s\nstdout: %s", p.stderr.String(), p.stdout.String())
	return p
}

// launchServe is startServe without waiting for the registration.
func launchServe(t *testing.T, dsn, redisAddr, prefix string, extraEnv map[string]string) *serveProcess {
	t.Helper()
	p := &serveProcess{admin: xxljobtest.New(t, xxljobtest.Options{Token: serveToken}), stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	port, apiPort := freePort(t), freePort(t)
	p.address = fmt.Sprintf("http://127.0.0.1:%d/", port)
	p.apiURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	env := map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":          p.admin.URL,
		"XXL_JOB_ACCESS_TOKEN":             serveToken,
		"XXL_JOB_EXECUTOR_PORT":            strconv.Itoa(port),
		"XXL_JOB_EXECUTOR_BINDADDR":        fmt.Sprintf("127.0.0.1:%d", port),
		"XXL_JOB_EXECUTOR_ADDRESS":         p.address,
		"XXL_JOB_EXECUTOR_LOGPATH":         t.TempDir(),
		"XXL_JOB_EXECUTOR_APPNAME":         serveAppName,
		"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT": "5s",
		"MYSQL_DSN":                        dsn,
		"REDIS_ADDR":                       redisAddr,
		"ORDER_CLOSE_LOCK_KEY_PREFIX":      prefix,
		"DELAY_KEY_PREFIX":                 prefix + "delay:",
		"EXECUTOR_API_ADDR":                fmt.Sprintf("127.0.0.1:%d", apiPort),
		"EXECUTOR_API_TOKEN":               "api-token-0123456789",
	}
	for k, v := range extraEnv {
		env[k] = v
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop, p.done = stop, make(chan int, 1)
	go func() { p.done <- run(ctx, []string{"serve"}, p.stdout, p.stderr) }()
	t.Cleanup(func() { p.shutdown(t) })
	return p
}

// closeRun triggers orderTimeoutCloseJob with logID as the admin would,
// requires the trigger accepted, and returns the run's callback. The
// client stays open until the test ends, for the run's log.
func (p *serveProcess) closeRun(t *testing.T, logID int64) (*xxljobtest.Client, xxljobtest.TriggerParam, xxljobtest.Callback) {
	t.Helper()
	client := xxljobtest.NewClient(p.address, serveToken, xxljobtest.V24)
	t.Cleanup(client.Close)
	trig := xxljobtest.Trigger(7, "orderTimeoutCloseJob", logID)
	env, err := client.Run(context.Background(), trig)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, env.MsgString())
	cb, err := p.admin.WaitCallback(logID, 30*time.Second)
	require.NoError(t, err)
	return client, trig, cb
}

// shutdown stops serve and requires a clean exit (once).
func (p *serveProcess) shutdown(t *testing.T) {
	if p.stop == nil {
		return
	}
	p.stop()
	p.stop = nil
	select {
	case code := <-p.done:
		require.Equal(t, 0, code, "stderr: %s", p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// postTask registers a delayed task over the API port.
func postTask(t *testing.T, p *serveProcess, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.apiURL+"/api/delay-tasks", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Executor-Token", "api-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}
