package xxljob_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestCallbackBatchesAndExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("fine")}})
	var ids []int64
	for i := range 20 {
		p := xxljobtest.Trigger(i+1, "ok", nextLogID())
		b.run(t, p)
		ids = append(ids, p.LogID)
	}
	for _, id := range ids {
		cb := b.callback(t, id)
		require.Equal(t, 200, cb.HandleCode)
		require.Equal(t, "fine", cb.HandleMsg)
		require.Zero(t, b.admin.Repeats(id))
	}
	require.LessOrEqual(t, b.admin.CallbackBatches(), 20)
}

func TestCallbackAdminDownThenBack(t *testing.T) {
	t.Parallel()
	for _, mode := range []xxljobtest.Mode{xxljobtest.Down503, xxljobtest.DownClose} {
		b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("late")}})
		b.admin.SetMode(mode)
		p := xxljobtest.Trigger(1, "ok", nextLogID())
		b.run(t, p)
		waitFor(t, func() bool {
			return strings.Contains(b.runLogNow(p), "----------- xxl-job job callback fail, callbackResult:")
		}, "first delivery failed")
		require.Equal(t, map[int64]int{p.LogID: 200}, spooled(t, b.logPath), "the result waits on disk")
		_, ok := b.admin.Callback(p.LogID)
		require.False(t, ok)

		b.admin.SetMode(xxljobtest.Up)
		cb := b.callback(t, p.LogID)
		require.Equal(t, 200, cb.HandleCode)
		require.Equal(t, "late", cb.HandleMsg)
		require.Equal(t, p.LogDateTime, cb.LogDateTim)
		waitFor(t, func() bool { return len(spooled(t, b.logPath)) == 0 }, "marked delivered in the spool")
		waitFor(t, func() bool {
			return strings.Contains(b.runLogNow(p), "----------- xxl-job job callback finish.")
		}, "callback finish line")
	}
}

func TestCallbackSurvivesRestart(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{Token: "T"})
	admin.SetMode(xxljobtest.Down503)
	root := t.TempDir()
	g := newGate()
	handlers := map[string]xxljob.Handler{"ok": okHandler("before restart"), "block": g.handler()}

	// First executor: one result while the admin is down, one flushed by Shutdown.
	first := setup(t, opts{token: "T", admin: admin, logPath: root, handlers: handlers,
		cfg: func(c *xxljob.Config) { c.CallbackRetryInterval = time.Hour }})
	p1 := xxljobtest.Trigger(1, "ok", nextLogID())
	first.run(t, p1)
	p2 := xxljobtest.Trigger(2, "block", nextLogID())
	first.run(t, p2)
	g.waitStarted(t, p2.LogID)
	waitFor(t, func() bool {
		return strings.Contains(first.runLogNow(p1), "callback fail")
	}, "first result's delivery failed")
	g.open()
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	require.NoError(t, first.exec.Shutdown(ctx))
	require.Empty(t, admin.Callbacks())
	require.Equal(t, map[int64]int{p1.LogID: 200, p2.LogID: 200}, spooled(t, root))

	// Second executor on the same LogPath, admin back.
	admin.SetMode(xxljobtest.Up)
	second := setup(t, opts{token: "T", admin: admin, logPath: root, handlers: map[string]xxljob.Handler{"ok": okHandler("")}})
	require.Equal(t, "before restart", second.callback(t, p1.LogID).HandleMsg)
	require.Equal(t, "released", second.callback(t, p2.LogID).HandleMsg)
	waitFor(t, func() bool { return len(spooled(t, root)) == 0 }, "spool emptied")
	require.Zero(t, admin.Repeats(p1.LogID))
}

func TestCallbackCorruptSpoolFileSetAside(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "callbacklog")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bad := filepath.Join(dir, "xxl-job-callback-1.json")
	require.NoError(t, os.WriteFile(bad, []byte("{not json"), 0o644))
	good := filepath.Join(dir, "xxl-job-callback-2.json")
	require.NoError(t, os.WriteFile(good, []byte(`[{"logId":77,"logDateTim":1700000000123,"handleCode":500,"handleMsg":"x"}]`), 0o644))

	b := setup(t, opts{logPath: root})
	cb := b.callback(t, 77)
	require.Equal(t, 500, cb.HandleCode)
	waitFor(t, func() bool { return len(spooled(t, root)) == 0 }, "spool emptied")
	require.FileExists(t, bad+".bad")
	require.NoFileExists(t, good, "an earlier spool file is removed once journaled")
}

// recorder is an Observer for tests.
type recorder struct {
	mu       sync.Mutex
	started  []int64
	finished map[int64]int
	sent     int
	sentErrs int
	spool    []int
	regs     int
	regErrs  int
}

func (r *recorder) RunStarted(_ string, _ int, logID int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, logID)
}

func (r *recorder) RunFinished(_ string, _ int, logID int64, code int, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished[logID] = code
}

func (r *recorder) CallbackSent(items int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent += items
	if err != nil {
		r.sentErrs++
	}
}

func (r *recorder) CallbackSpool(files int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spool = append(r.spool, files)
}

func (r *recorder) Registered(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.regs++
	if err != nil {
		r.regErrs++
	}
}

func (r *recorder) snapshot(f func(*recorder) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

func TestObserver(t *testing.T) {
	t.Parallel()
	rec := &recorder{finished: map[int64]int{}}
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("")},
		cfg: func(c *xxljob.Config) { c.Observer = rec }})
	b.admin.SetMode(xxljobtest.Down503)
	p := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, p)
	waitFor(t, func() bool {
		return rec.snapshot(func(r *recorder) bool { return r.sentErrs > 0 && len(r.spool) > 0 && r.regErrs > 0 })
	}, "failed callback, spool and registry seen")
	b.admin.SetMode(xxljobtest.Up)
	b.callback(t, p.LogID)
	waitFor(t, func() bool {
		return rec.snapshot(func(r *recorder) bool { return r.spool[len(r.spool)-1] == 0 && r.regs > r.regErrs })
	}, "spool emptied and registry recovered")
	rec.snapshot(func(r *recorder) bool {
		require.Equal(t, []int64{p.LogID}, r.started)
		require.Equal(t, map[int64]int{p.LogID: 200}, r.finished)
		require.GreaterOrEqual(t, r.sent, 2) // one failed attempt, one delivery
		return true
	})
}

func TestAdminAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"2.x", 200, `{"code":200,"msg":null,"content":null}`, true},
		{"3.4", 200, `{"code":200,"msg":null,"data":null,"extra":[1]}`, true},
		{"gson", 200, `{"code":200}`, true},
		{"code 500", 200, `{"code":500,"msg":"The access token is wrong.","content":null}`, false},
		{"no code", 200, `{}`, false},
		{"array", 200, `[{"code":200}]`, false},
		{"garbage", 200, `<html>oops</html>`, false},
		{"empty", 200, ``, false},
		{"http 500", 500, `{"code":200}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer admin.Close()
			rec := &recorder{finished: map[int64]int{}}
			e, err := xxljob.New(xxljob.Config{AdminAddresses: []string{admin.URL}, AppName: "x", ListenAddr: "127.0.0.1:0",
				LogPath: t.TempDir(), Observer: rec, RegistryInterval: time.Hour})
			require.NoError(t, err)
			require.NoError(t, e.Start(t.Context()))
			waitFor(t, func() bool { return rec.snapshot(func(r *recorder) bool { return r.regs == 1 }) }, "one registry round")
			require.NoError(t, e.Shutdown(t.Context()))
			require.Equal(t, tc.ok, rec.regErrs == 0)
		})
	}
}

// TestJavaSpoolImport: results a Java 3.3/3.4 (logDateTim) or post-3.4
// (logDateTime) executor left undelivered in {logpath}/callbacklogs reach the
// admin once, and their files are moved aside; Java 2.x files (Java
// serialisation, in callbacklog/) are left untouched and named in the log.
func TestJavaSpoolImport(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	java3 := filepath.Join(root, "callbacklogs")
	java2 := filepath.Join(root, "callbacklog")
	require.NoError(t, os.MkdirAll(java3, 0o755))
	require.NoError(t, os.MkdirAll(java2, 0o755))
	f34 := filepath.Join(java3, "xxl-job-callback-9e107d9d372bb6826bd81d3542a419d6.log")
	require.NoError(t, os.WriteFile(f34, []byte(`[{"logId":501,"logDateTim":1761412677119,"handleCode":200,"handleMsg":"java 3.4"},`+
		`{"logId":502,"logDateTim":1761412677120,"handleCode":500,"handleMsg":"java failed"}]`), 0o644))
	fMain := filepath.Join(java3, "xxl-job-callback-e4d909c290d0fb1ca068ffaddf22cbd0.log")
	require.NoError(t, os.WriteFile(fMain, []byte(`[{"logId":503,"logDateTime":1761412677121,"handleCode":502,"handleMsg":"job execute timeout "}]`), 0o644))
	bad := filepath.Join(java3, "xxl-job-callback-0.log")
	require.NoError(t, os.WriteFile(bad, []byte(`{"not":"a list"`), 0o644))
	ser := filepath.Join(java2, "xxl-job-callback-1761412677119.log")
	serialized := []byte{0xac, 0xed, 0x00, 0x05, 's', 'r'} // a Java serialisation stream
	require.NoError(t, os.WriteFile(ser, serialized, 0o644))

	b := setup(t, opts{logPath: root})
	for id, want := range map[int64]xxljobtest.Callback{
		501: {LogID: 501, LogDateTim: 1761412677119, HandleCode: 200, HandleMsg: "java 3.4"},
		502: {LogID: 502, LogDateTim: 1761412677120, HandleCode: 500, HandleMsg: "java failed"},
		503: {LogID: 503, LogDateTim: 1761412677121, HandleCode: 502, HandleMsg: "job execute timeout "},
	} {
		cb := b.callback(t, id)
		want.Raw = cb.Raw
		require.Equal(t, want, cb)
	}
	require.NoFileExists(t, f34)
	require.FileExists(t, f34+".imported")
	require.FileExists(t, fMain+".imported")
	require.FileExists(t, bad+".bad", "an unreadable file is set aside, not lost")
	data, err := os.ReadFile(ser)
	require.NoError(t, err)
	require.Equal(t, serialized, data, "Java 2.x file untouched")
	require.Contains(t, b.logs.String(), "Java 2.x callback spool file left untouched")
	require.Contains(t, b.logs.String(), ser)
	waitFor(t, func() bool { return len(spooled(t, root)) == 0 }, "spool emptied")

	// Imported once: a restart sends nothing again.
	require.NoError(t, b.exec.Shutdown(t.Context()))
	before := b.admin.CallbackBatches()
	again := setup(t, opts{admin: b.admin, logPath: root})
	_, err = again.admin.WaitRegistrations(len(again.admin.Registrations())+2, waitLong)
	require.NoError(t, err)
	require.Equal(t, before, b.admin.CallbackBatches())
	require.Zero(t, b.admin.Repeats(501))
}

// One /api/callback POST carries at most 50 results, as the Java
// executor's callback queue sends them, also when a backlog is retried from
// the spool.
func TestCallbackBatchesOfFifty(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("")}})
	b.admin.SetMode(xxljobtest.Down503)
	var ids []int64
	for i := range 130 {
		p := xxljobtest.Trigger(i+1, "ok", nextLogID())
		b.run(t, p)
		ids = append(ids, p.LogID)
	}
	waitFor(t, func() bool { return len(spooled(t, b.logPath)) == len(ids) }, "every result waits on disk")
	b.admin.SetMode(xxljobtest.Up)
	for _, id := range ids {
		require.Equal(t, 200, b.callback(t, id).HandleCode)
	}
	largest := 0
	for _, r := range b.admin.Requests() {
		if !strings.HasSuffix(r.Path, "api/callback") {
			continue
		}
		var batch []json.RawMessage
		require.NoError(t, json.Unmarshal(r.Body, &batch), "%s", r.Body)
		largest = max(largest, len(batch))
	}
	require.Equal(t, 50, largest, "the largest callback POST")
}
