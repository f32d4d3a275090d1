package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// serve refuses to start without an access token, naming the setting and
// its variable, before it connects to anything (the DSN here points
// nowhere).
func TestServeRefusesWithoutToken(t *testing.T) {
	code, out, errOut := runCLI(t, map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(), "EXECUTOR_API_ADDR": "",
		"MYSQL_DSN": "root@tcp(127.0.0.1:1)/none"}, "serve")
	require.Equal(t, 1, code)
	for _, want := range []string{"xxl.job.accessToken (XXL_JOB_ACCESS_TOKEN) is empty",
		"xxl.job.executor.openWithoutToken: true (XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN=true)"} {
		require.Contains(t, errOut, want)
	}
	require.NotContains(t, out, "executor serving")
}

// xxl.job.executor.openWithoutToken: serve starts without a token, on
// loopback since bindAddr is not set, and warns once.
func TestServeOpenWithoutTokenOnLoopback(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{
		"XXL_JOB_ACCESS_TOKEN": "", "XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN": "true", "XXL_JOB_EXECUTOR_BINDADDR": "",
	})
	port := strings.TrimSuffix(p.address[strings.LastIndex(p.address, ":")+1:], "/")
	require.Eventually(t, func() bool { return strings.Contains(p.stdout.String(), "xxl-job protocol serving") },
		20*time.Second, 50*time.Millisecond, "stderr: %s", p.stderr.String())
	out := p.stdout.String()
	require.Contains(t, out, fmt.Sprintf(`"addr":"127.0.0.1:%s"`, port))
	require.Equal(t, 1, strings.Count(out, "WITHOUT AN ACCESS TOKEN"), "one warning about the empty token:\n%s", out)
	require.NotContains(t, out, "accessToken is EMPTY", "the app's second warning is gone")
	resp, err := http.Post("http://127.0.0.1:"+port+"/beat", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
