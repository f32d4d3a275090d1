package xxljob_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
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

// TestCallbackKill9WhileAdminHangs: results finished while the admin hangs
// (some in memory waiting for a delivery that never answers, some beyond the
// memory bound) are all delivered by the next executor on the same log path
// after the first one is killed with SIGKILL.
func TestCallbackKill9WhileAdminHangs(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{})
	admin.SetMode(xxljobtest.Hang)
	root := t.TempDir()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "XXLJOB_TEST_ADMIN="+admin.URL, "XXLJOB_TEST_LOGPATH="+root)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
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
	defer client.Close()
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

	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no shutdown, no flush
	_ = cmd.Wait()
	killed = true
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
