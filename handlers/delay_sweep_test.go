package handlers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/xxljob"
)

func TestDelaySweepOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		param   string
		limit   int
		wantErr string
	}{
		{param: "", limit: 1000},
		{param: "limit=20", limit: 20},
		{param: `{"limit": 5}`, limit: 5},
		{param: "limit=0", wantErr: `limit="0": want a whole number from 1 to 100000`},
		{param: "limit=x", wantErr: "want a whole number"},
		{param: "limit=5,shard=1", wantErr: "unknown job param key(s) shard; allowed: limit"},
		{param: "limit", wantErr: "expected key=value pairs"},
	} {
		o, err := delaySweepOptions(tc.param)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.param)
			continue
		}
		require.NoError(t, err, tc.param)
		require.Equal(t, tc.limit, o.Limit, tc.param)
	}
}

// The sweep job runs through the executor's own run path (RunOnce), sharded,
// against real tasks the timer never heard of.
func TestDelayTaskSweepRunsMissedTasks(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	ctx := context.Background()
	ran := map[string]int{}
	handlersRun := make(chan string, 100)
	d, err := delay.NewDispatcher(db.DB, rdb, delay.Config{
		KeyPrefix: prefix, SweepGrace: time.Millisecond, BackoffBase: time.Hour,
		Handlers: map[string]delay.HandlerFunc{
			"ok": func(_ context.Context, t *delay.Task) error { handlersRun <- t.BizUUID; return nil },
			"bad": func(context.Context, *delay.Task) error {
				return delay.Permanent(errors.New("cannot ever work"))
			},
		},
	})
	require.NoError(t, err)
	reg, err := delay.NewClient(db.DB, nil, delay.ClientConfig{}) // no timer: only the sweep finds them
	require.NoError(t, err)
	for i := range 12 {
		_, _, err := reg.Register(ctx, delay.Registration{BizUUID: fmt.Sprintf("missed-%d", i), Handler: "ok",
			ExecuteTime: time.Now().Add(-time.Minute)})
		require.NoError(t, err)
	}

	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: "delay-sweep-test", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, exec.Register(DelayTaskSweepJob, DelayTaskSweep(d)))

	// Shard 0 of 2 with a limit, then the rest.
	res, err := exec.RunOnce(ctx, DelayTaskSweepJob, "limit=2", 0, 2, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Contains(t, res.Msg, "found=2 claimed=2 done=2")
	for _, shard := range []int{0, 1} {
		res, err = exec.RunOnce(ctx, DelayTaskSweepJob, "", shard, 2, nil)
		require.NoError(t, err)
		require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	}
	close(handlersRun)
	for biz := range handlersRun {
		ran[biz]++
	}
	require.Len(t, ran, 12)
	for biz, n := range ran {
		require.Equal(t, 1, n, biz)
	}

	// A task that fails for good fails the run, so the admin's alarm fires.
	_, _, err = reg.Register(ctx, delay.Registration{BizUUID: "doomed", Handler: "bad", ExecuteTime: time.Now().Add(-time.Minute)})
	require.NoError(t, err)
	res, err = exec.RunOnce(ctx, DelayTaskSweepJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeFail, res.Code)
	require.Contains(t, res.Msg, "failed for good")
	tk, err := reg.Get(ctx, "doomed")
	require.NoError(t, err)
	require.Equal(t, delay.StatusFailed, tk.Status)

	// A bad param fails the run before touching anything.
	res, err = exec.RunOnce(ctx, DelayTaskSweepJob, "limit=5,oops=1", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeFail, res.Code)
	require.Contains(t, res.Msg, "unknown job param key(s) oops")
}
