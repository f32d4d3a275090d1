package xxljob_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// The crash test runs an executor in a child process (this test binary,
// started with crashChildEnv set), so that it can be killed with SIGKILL.
const crashChildEnv = "XXLJOB_TEST_CRASH_CHILD"

// crashChild is the child's main: an executor on the given admin and log
// path that prints its address and serves until it is killed.
func crashChild() {
	admin, logPath := os.Getenv("XXLJOB_TEST_ADMIN"), os.Getenv("XXLJOB_TEST_LOGPATH")
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true,
		AdminAddresses: []string{admin}, AdminVersion: xxljob.Admin2x, AppName: "crash-executor",
		Address: "http://127.0.0.1:9999/", ListenAddr: "127.0.0.1:0", LogPath: logPath,
		CallbackQueueSize: 3, HTTPClientTimeout: time.Minute, // the admin hangs: attempts stay in flight
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err == nil {
		err = e.Register("ok", xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
			req.SetResult(fmt.Sprintf("done %d", req.LogID))
			return nil
		}))
	}
	if err == nil { // runs until the process is killed
		err = e.Register("block", xxljob.HandlerFunc(func(ctx context.Context, _ *xxljob.Request) error {
			<-ctx.Done()
			return ctx.Err()
		}))
	}
	if err == nil {
		err = e.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("LISTEN %s\n", e.Addr())
	select {}
}

// startCrashChild starts crashChild on admin and root and returns a client
// of its port and the function that kills it with SIGKILL (also called, if
// not yet, when the test ends).
func startCrashChild(t *testing.T, admin *xxljobtest.Admin, root string) (*xxljobtest.Client, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "XXLJOB_TEST_ADMIN="+admin.URL, "XXLJOB_TEST_LOGPATH="+root)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var once sync.Once
	kill9 := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		kill9()
		if t.Failed() {
			t.Logf("child's log:\n%s", stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "child: %s", stderr.String())
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	require.True(t, ok, line)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	client := xxljobtest.NewClient("http://"+addr, "", xxljobtest.V24)
	t.Cleanup(client.Close)
	return client, kill9
}

// TestCallbackKill9WhileAdminHangs: results finished while the admin hangs
// (some in memory waiting for a delivery that never answers, some beyond the
// memory bound) are all delivered by the next executor on the same log path
// after the first one is killed with SIGKILL.
func TestCallbackKill9WhileAdminHangs(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{})
	admin.SetMode(xxljobtest.Hang)
	root := t.TempDir()
	client, kill9 := startCrashChild(t, admin, root)
	const runs = 20
	var ps []xxljobtest.TriggerParam
	for i := range runs {
		p := xxljobtest.Trigger(i+1, "ok", nextLogID())
		env, err := client.Run(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, 200, env.Code)
		ps = append(ps, p)
	}
	// Every run is over by its log: its result is in the spool.
	b := &bundle{logPath: root}
	waitFor(t, func() bool {
		for _, p := range ps {
			if !strings.Contains(b.runLogNow(p), "----------- Result: handleCode=200") {
				return false
			}
		}
		return true
	}, "all runs finished")

	kill9() // no shutdown, no flush
	require.Empty(t, admin.Callbacks(), "the hanging admin accepted nothing")

	admin.SetMode(xxljobtest.Up)
	next := setup(t, opts{admin: admin, logPath: root})
	for _, p := range ps {
		cb := next.callback(t, p.LogID)
		require.Equal(t, 200, cb.HandleCode)
		require.Equal(t, fmt.Sprintf("done %d", p.LogID), cb.HandleMsg)
		require.Equal(t, p.LogDateTime, cb.LogDateTim)
	}
	waitFor(t, func() bool { return len(spooled(t, root)) == 0 }, "spool emptied")
	for _, p := range ps {
		require.Zero(t, admin.Repeats(p.LogID))
	}
}

// TestCallbackQueueBoundedWhileAdminHangs: with the admin hanging, memory
// holds at most CallbackQueueSize results; the rest wait on disk, and all
// arrive once the admin answers again.
func TestCallbackQueueBoundedWhileAdminHangs(t *testing.T) {
	t.Parallel()
	const bound = 4
	admin := xxljobtest.New(t, xxljobtest.Options{})
	admin.SetMode(xxljobtest.Hang)
	b := setup(t, opts{admin: admin, handlers: map[string]xxljob.Handler{"ok": okHandler("ok")},
		cfg: func(c *xxljob.Config) {
			c.CallbackQueueSize = bound
			c.HTTPClientTimeout = 300 * time.Millisecond
			c.CallbackRetryInterval = time.Hour // only the nudge after a success retries
		}})
	var mu sync.Mutex
	maxQueued := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			mu.Lock()
			maxQueued = max(maxQueued, b.exec.CallbackQueueLen())
			mu.Unlock()
		}
	}()
	const runs = 60
	var ps []xxljobtest.TriggerParam
	for i := range runs {
		p := xxljobtest.Trigger(i+1, "ok", nextLogID())
		b.run(t, p)
		ps = append(ps, p)
	}
	waitFor(t, func() bool { return len(spooled(t, b.logPath)) == runs }, "every result on disk")
	time.Sleep(100 * time.Millisecond) // a few more samples while the admin hangs
	close(stop)
	<-done
	mu.Lock()
	require.LessOrEqual(t, maxQueued, bound, "memory bounded")
	mu.Unlock()

	admin.SetMode(xxljobtest.Up)
	for _, p := range ps {
		require.Equal(t, 200, b.callback(t, p.LogID).HandleCode)
	}
	waitFor(t, func() bool { return len(spooled(t, b.logPath)) == 0 }, "spool emptied")
}

// TestRunKilledMidRunReportedOnce: a run going on when its executor is
// killed with SIGKILL is reported as failed by the next executor on the
// same log path, once, and handed to InterruptedFunc until it accepts it;
// a run that finished before the kill is not reported again.
func TestRunKilledMidRunReportedOnce(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{})
	root := t.TempDir()
	client, kill9 := startCrashChild(t, admin, root)

	done := xxljobtest.Trigger(1, "ok", nextLogID())
	env, err := client.Run(t.Context(), done)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	_, err = admin.WaitCallback(done.LogID, waitLong)
	require.NoError(t, err)
	// The admin has it before the child marks it delivered in its spool; a
	// kill in between sends it again after the restart (at least once).
	waitFor(t, func() bool { _, waiting := spooled(t, root)[done.LogID]; return !waiting },
		"the finished run marked delivered in the child's spool")
	mid := xxljobtest.Trigger(2, "block", nextLogID())
	mid.ExecutorParams, mid.BroadcastIndex, mid.BroadcastTotal = "p=1", 1, 2
	env, err = client.Run(t.Context(), mid)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	b := &bundle{logPath: root}
	waitFor(t, func() bool { return strings.Contains(b.runLogNow(mid), "xxl-job job execute start") }, "run started")
	killedAt := time.Now()
	kill9()
	_, reported := admin.Callback(mid.LogID)
	require.False(t, reported, "the killed run reported before the restart")

	// Each restart hands the run to InterruptedFunc; the first refuses it.
	var mu sync.Mutex
	var handed []xxljob.InterruptedRun
	restart := func(refuse bool) *bundle {
		return setup(t, opts{admin: admin, logPath: root, cfg: func(c *xxljob.Config) {
			c.InterruptedFunc = func(_ context.Context, run xxljob.InterruptedRun) error {
				mu.Lock()
				defer mu.Unlock()
				handed = append(handed, run)
				if refuse {
					return errors.New("database down")
				}
				return nil
			}
		}})
	}
	handedOver := func() []xxljob.InterruptedRun {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(handed)
	}
	shutdown := func(b *bundle) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.exec.Shutdown(ctx))
	}

	next := restart(true)
	cb := next.callback(t, mid.LogID)
	require.Equal(t, xxljob.CodeFail, cb.HandleCode)
	require.Contains(t, cb.HandleMsg, "executor restarted during the run")
	require.Equal(t, mid.LogDateTime, cb.LogDateTim)
	require.Contains(t, next.runLog(t, mid), "executor restarted during the run")
	waitFor(t, func() bool { return len(handedOver()) == 1 }, "run handed to InterruptedFunc")
	run := handedOver()[0]
	require.Equal(t, xxljob.InterruptedRun{Handler: "block", JobID: 2, LogID: mid.LogID, LogDateTime: time.UnixMilli(mid.LogDateTime),
		Param: "p=1", ShardIndex: 1, ShardTotal: 2, StartedAt: run.StartedAt, Msg: cb.HandleMsg}, run)
	require.WithinRange(t, run.StartedAt, killedAt.Add(-waitLong), killedAt)
	waitFor(t, func() bool { return len(spooled(t, root)) == 0 }, "spool emptied")
	shutdown(next)

	// Refused: handed over again, and the admin is not told a second time.
	again := restart(false)
	waitFor(t, func() bool { return len(handedOver()) == 2 }, "run handed over again")
	require.Equal(t, run.LogID, handedOver()[1].LogID)
	shutdown(again)
	last := restart(false)
	time.Sleep(200 * time.Millisecond) // several spool retry periods
	shutdown(last)

	require.Len(t, handedOver(), 2, "accepted: not handed over a third time")
	require.Zero(t, admin.Repeats(mid.LogID), "the interrupted run reported more than once")
	require.Zero(t, admin.Repeats(done.LogID), "the finished run reported again")
	got, _ := admin.Callback(done.LogID)
	require.Equal(t, 200, got.HandleCode)
	require.Len(t, admin.Callbacks(), 2)
}
