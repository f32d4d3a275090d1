package xxljob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestShutdownWaitsForRunningJob(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler(), "ok": okHandler("")}})
	t.Cleanup(g.open)
	p, queued := b.holdThread(t, g)

	done := make(chan error, 1)
	go func() { done <- b.exec.Shutdown(context.Background()) }()

	// While waiting for the job: /run refused, the queued trigger killed at
	// once, beats failing so the admin routes elsewhere.
	waitFor(t, func() bool {
		env, err := b.client.Run(t.Context(), xxljobtest.Trigger(2, "ok", nextLogID()))
		return err == nil && env.MsgString() == "executor is shutting down, trigger refused"
	}, "/run refused during shutdown")
	cb := b.callback(t, queued.LogID)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "web container destroy and kill the job. [job not executed, in the job queue, killed.]", cb.HandleMsg)
	_, err := b.admin.WaitRemovals(1, waitLong)
	require.NoError(t, err)
	const draining = `{"code":500,"msg":"executor is shutting down, route to another executor"}`
	env, err := b.client.Beat(t.Context())
	require.NoError(t, err)
	require.Equal(t, draining, string(env.Raw), "FAILOVER must move on")
	env, err = b.client.IdleBeat(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, draining, string(env.Raw), "BUSYOVER must move on")
	env, err = b.client.IdleBeat(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, draining, string(env.Raw), "an idle job too")
	env, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	require.Contains(t, lr.LogContent, "execute start")
	env, err = b.client.Kill(t.Context(), 3)
	require.NoError(t, err)
	require.Equal(t, "job thread already killed.", env.MsgString())
	require.NotContains(t, b.runLogNow(queued), "execute start", "the queued trigger never ran")

	g.open() // the running trigger finishes normally
	require.NoError(t, <-done)
	// Flushed before Shutdown returned: no waiting needed.
	cb, ok := b.admin.Callback(p.LogID)
	require.True(t, ok, "callback delivered by Shutdown")
	require.Equal(t, 200, cb.HandleCode)
	// registryRemove came before the results.
	removeAt, callbackAt := -1, -1
	for i, r := range b.admin.Requests() {
		if strings.HasSuffix(r.Path, "/registryRemove") && removeAt < 0 {
			removeAt = i
		}
		if strings.HasSuffix(r.Path, "/callback") && strings.Contains(string(r.Body), fmt.Sprintf(`"logId":%d,`, p.LogID)) {
			callbackAt = i
		}
	}
	require.True(t, removeAt >= 0 && removeAt < callbackAt, "registryRemove %d, callback %d", removeAt, callbackAt)
	require.Equal(t, []xxljobtest.Registry{{RegistryGroup: "EXECUTOR", RegistryKey: "test-executor", RegistryValue: "http://127.0.0.1:9999/"}}, b.admin.Removals())
	_, err = b.client.Beat(t.Context())
	require.Error(t, err, "server closed")
	require.NoError(t, b.exec.Shutdown(t.Context()), "second call")
}

func TestShutdownCancelsAfterTimeout(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()},
		cfg: func(c *xxljob.Config) { c.ShutdownTimeout = 50 * time.Millisecond }})
	t.Cleanup(g.open)
	p, queued := b.holdThread(t, g)

	require.NoError(t, b.exec.Shutdown(t.Context()))
	cb, ok := b.admin.Callback(p.LogID)
	require.True(t, ok)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "web container destroy and kill the job. [job running, killed]", cb.HandleMsg)
	cb, ok = b.admin.Callback(queued.LogID)
	require.True(t, ok)
	require.Equal(t, "web container destroy and kill the job. [job not executed, in the job queue, killed.]", cb.HandleMsg)
	require.Len(t, b.admin.Removals(), 1)
}

func TestShutdownAdminDownSpoolsResults(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	p := xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, p)
	g.waitStarted(t, p.LogID)
	b.admin.SetMode(xxljobtest.DownClose)
	go g.open()
	require.NoError(t, b.exec.Shutdown(t.Context()))
	require.Equal(t, map[int64]int{p.LogID: 200}, spooled(t, b.logPath))
}

func TestShutdownStubbornHandler(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"stubborn": g.stubborn()}, shutdownErrOK: true,
		cfg: func(c *xxljob.Config) { c.ShutdownTimeout = 20 * time.Millisecond }})
	p := xxljobtest.Trigger(1, "stubborn", nextLogID())
	b.run(t, p)
	g.waitStarted(t, p.LogID)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := b.exec.Shutdown(ctx)
	require.ErrorContains(t, err, "1 handlers still running")
	require.True(t, errors.Is(err, context.DeadlineExceeded))
	cb, ok := b.admin.Callback(p.LogID)
	require.True(t, ok, "reported although the handler ignores cancellation")
	require.Equal(t, 500, cb.HandleCode)
	g.open() // the handler goroutine ends; goleak checks at the end
	require.Equal(t, err, b.exec.Shutdown(t.Context()), "a second call returns the first result")
}

func TestRunOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"}, AppName: "cli", LogPath: root})
	require.NoError(t, err)
	require.NoError(t, e.Register("hello", xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		req.Logf("param=%s shard=%d/%d", req.Param, req.ShardIndex, req.ShardTotal)
		req.SetResult("hi")
		return nil
	})))
	require.NoError(t, e.Register("fail", xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
		return errors.New("nope")
	})))
	require.NoError(t, e.Register("slow", xxljob.HandlerFunc(func(ctx context.Context, _ *xxljob.Request) error {
		<-ctx.Done()
		return ctx.Err()
	})))

	var out bytes.Buffer
	res, err := e.RunOnce(t.Context(), "hello", "x=1", 1, 2, &out)
	require.NoError(t, err)
	require.Equal(t, xxljob.Result{Code: xxljob.CodeSuccess, Msg: "hi"}, res)
	require.Contains(t, out.String(), "----------- xxl-job job execute start -----------\n")
	require.Contains(t, out.String(), "[INFO] param=x=1 shard=1/2\n")
	require.Contains(t, out.String(), "----------- Result: handleCode=200, handleMsg = hi\n")
	files, err := os.ReadDir(root + "/" + time.Now().Format("2006-01-02"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(root + "/" + time.Now().Format("2006-01-02") + "/" + files[0].Name())
	require.NoError(t, err)
	require.Equal(t, out.String(), string(data))

	res, err = e.RunOnce(t.Context(), "fail", "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.Result{Code: xxljob.CodeFail, Msg: "nope"}, res)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	res, err = e.RunOnce(ctx, "slow", "", 0, 0, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeTimeout, res.Code)

	_, err = e.RunOnce(t.Context(), "missing", "", 0, 1, nil)
	require.ErrorContains(t, err, "job handler [missing] not found.")
	_, err = e.RunOnce(t.Context(), "hello", "", 3, 2, nil)
	require.Error(t, err)
	require.NoError(t, e.Shutdown(t.Context()))
}
