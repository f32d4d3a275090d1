package xxljob_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // never returns: the test kills it
	}
	goleak.VerifyTestMain(m)
}

const waitLong = 5 * time.Second

// adminWait is how long the admin waits for an answer, 3 s, and five times
// that under the race detector, which makes decoding and encoding large
// bodies about five times slower (a 4.6 MB body took up to 0.9 s without
// it and 4.9 s with it on a loaded 2-core machine).
func adminWait() time.Duration {
	if raceDetector {
		return 5 * 3 * time.Second
	}
	return 3 * time.Second
}

// nextLogID hands out logIds unique across the test binary.
var logIDs atomic.Int64

func nextLogID() int64 { return logIDs.Add(1) + 1000 }

type opts struct {
	token    string
	handlers map[string]xxljob.Handler
	cfg      func(*xxljob.Config)
	before   func(*xxljob.Executor) // after New, before Start
	admin    *xxljobtest.Admin      // reuse an admin (restart tests)
	logPath  string                 // reuse a log path (restart tests)
	version  xxljob.AdminVersion    // default Admin2x, the fake admin's V24

	adminVersion xxljobtest.Version // the generation the test client speaks

	shutdownErrOK bool // the test checks Shutdown's error itself

	startCtx context.Context // what Start gets (default t.Context())
}

type bundle struct {
	admin   *xxljobtest.Admin
	exec    *xxljob.Executor
	client  *xxljobtest.Client
	logPath string
	logs    *syncBuffer // process log
}

// setup starts a fake admin and an executor on a random port, shut down at
// the end of the test (before the admin closes).
func setup(t *testing.T, o opts) *bundle {
	t.Helper()
	b := &bundle{admin: o.admin, logPath: o.logPath, logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process log:\n%s", b.logs.String())
		}
	})
	if b.admin == nil {
		b.admin = xxljobtest.New(t, xxljobtest.Options{Token: o.token, Version: o.adminVersion})
	}
	if b.logPath == "" {
		b.logPath = t.TempDir()
	}
	cfg := xxljob.Config{
		AdminAddresses:        []string{b.admin.URL},
		AccessToken:           o.token,
		OpenWithoutToken:      o.token == "",
		AdminVersion:          cmp.Or(o.version, xxljob.Admin2x),
		AppName:               "test-executor",
		Address:               "http://127.0.0.1:9999/",
		ListenAddr:            "127.0.0.1:0",
		LogPath:               b.logPath,
		LogRetentionDays:      1, // no cleanup: fixtures' trigger times are years old (the cleanup tests set it)
		ShutdownTimeout:       5 * time.Second,
		RegistryInterval:      50 * time.Millisecond,
		CallbackRetryInterval: 50 * time.Millisecond,
		HTTPClientTimeout:     2 * time.Second,
		Logger:                newTextLogger(b.logs),
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	exec, err := xxljob.New(cfg)
	require.NoError(t, err)
	for name, h := range o.handlers {
		require.NoError(t, exec.Register(name, h))
	}
	if o.before != nil {
		o.before(exec)
	}
	require.NoError(t, exec.Start(cmp.Or(o.startCtx, t.Context())))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := exec.Shutdown(ctx); !o.shutdownErrOK {
			require.NoError(t, err)
		}
	})
	b.exec = exec
	b.client = xxljobtest.NewClient("http://"+exec.Addr().String()+"/", o.token, o.adminVersion)
	b.client.AppName = cfg.AppName
	t.Cleanup(b.client.Close)
	return b
}

// run triggers p and requires it to be accepted.
func (b *bundle) run(t *testing.T, p xxljobtest.TriggerParam) {
	t.Helper()
	env, err := b.client.Run(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, "trigger logId %d: %s", p.LogID, env.Raw)
}

// callback waits for the callback of logID.
// holdThread triggers job 1's "block" handler (g's) until that run holds
// the job thread, then queues a second trigger behind it; g.open releases
// both.
func (b *bundle) holdThread(t *testing.T, g *gate) (running, queued xxljobtest.TriggerParam) {
	t.Helper()
	running = xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, running)
	g.waitStarted(t, running.LogID)
	queued = xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, queued)
	return running, queued
}

func (b *bundle) callback(t *testing.T, logID int64) xxljobtest.Callback {
	t.Helper()
	return b.callbackWithin(t, logID, waitLong)
}

// callbackWithin waits up to d for the callback of logID: for runs whose
// own work takes seconds under the race detector on a loaded machine.
func (b *bundle) callbackWithin(t *testing.T, logID int64, d time.Duration) xxljobtest.Callback {
	t.Helper()
	c, err := b.admin.WaitCallback(logID, d)
	require.NoError(t, err)
	return c
}

// runLog returns the content of a run's log file.
func (b *bundle) runLog(t *testing.T, p xxljobtest.TriggerParam) string {
	t.Helper()
	data, err := os.ReadFile(logFile(b.logPath, p.LogDateTime, p.LogID))
	require.NoError(t, err)
	return string(data)
}

// runLogNow is runLog for polling: "" while the file does not exist yet.
func (b *bundle) runLogNow(p xxljobtest.TriggerParam) string {
	data, _ := os.ReadFile(logFile(b.logPath, p.LogDateTime, p.LogID))
	return string(data)
}

func logFile(root string, logDateTime, logID int64) string {
	day := time.UnixMilli(logDateTime).Format("2006-01-02")
	return filepath.Join(root, day, strconv.FormatInt(logID, 10)+".log")
}

// gate is a handler that blocks until opened or cancelled.
type gate struct {
	started chan int64 // logId of each run that started
	release chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan int64, 100), release: make(chan struct{})}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// handler honours cancellation.
func (g *gate) handler() xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		g.started <- req.LogID
		select {
		case <-g.release:
			req.SetResult("released")
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// stubborn ignores cancellation.
func (g *gate) stubborn() xxljob.Handler {
	return xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		g.started <- req.LogID
		<-g.release
		return nil
	})
}

func (g *gate) waitStarted(t *testing.T, logID int64) {
	t.Helper()
	select {
	case got := <-g.started:
		require.Equal(t, logID, got)
	case <-time.After(waitLong):
		t.Fatalf("run %d did not start", logID)
	}
}

func okHandler(msg string) xxljob.Handler {
	return xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		req.SetResult(msg)
		return nil
	})
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, waitLong, 5*time.Millisecond, msg)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// jsonKeys returns the keys of a JSON object in wire order.
func jsonKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, "not an object: %s", raw)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// spooled returns the results waiting in the callback spool under root.
func spooled(t *testing.T, root string) map[int64]int {
	t.Helper()
	m, err := xxljobtest.Spooled(root)
	require.NoError(t, err)
	return m
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// syncBuffer is a log destination written by several goroutines.
type syncBuffer = xxljob.SyncBuffer
