package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// TestHelloExecutor runs the example against a fake admin: it registers,
// runs helloJob, reports the result, exports metrics and stops cleanly.
func TestHelloExecutor(t *testing.T) {
	admin := xxljobtest.New(t, xxljobtest.Options{Token: "T"})
	execAddr, metricsAddr := freeAddr(t), freeAddr(t)
	env := map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":   admin.URL,
		"XXL_JOB_ACCESS_TOKEN":      "T",
		"XXL_JOB_EXECUTOR_ADDRESS":  "http://" + execAddr + "/",
		"XXL_JOB_EXECUTOR_BINDADDR": execAddr,
		"XXL_JOB_EXECUTOR_LOGPATH":  t.TempDir(),
		"METRICS_ADDR":              metricsAddr,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.DiscardHandler), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}()
	regs, err := admin.WaitRegistrations(1, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "hello-executor", regs[0].RegistryKey)

	c := xxljobtest.NewClient("http://"+execAddr, "T", xxljobtest.V24)
	defer c.Close()
	p := xxljobtest.Trigger(1, "helloJob", 42)
	p.ExecutorParams = "gopher"
	env2, err := c.Run(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 200, env2.Code)
	cb, err := admin.WaitCallback(42, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "greeted gopher", cb.HandleMsg)

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.True(t, strings.Contains(string(body), `xxljob_runs_total{handler="helloJob",result="success"} 1`), string(body))

	cancel()
	require.NoError(t, <-done)
	_, err = admin.WaitRemovals(1, time.Second)
	require.NoError(t, err)
	http.DefaultClient.CloseIdleConnections()
}
