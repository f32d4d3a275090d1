package xxljob_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	regs, err := b.admin.WaitRegistrations(3, waitLong) // at start, then every RegistryInterval
	require.NoError(t, err)
	for _, r := range regs {
		require.Equal(t, xxljobtest.Registry{RegistryGroup: "EXECUTOR", RegistryKey: "test-executor", RegistryValue: "http://127.0.0.1:9999/"}, r)
	}
	require.Empty(t, b.admin.Removals())
}

func TestRegistrationTriesAdminsInOrder(t *testing.T) {
	t.Parallel()
	down := xxljobtest.New(t, xxljobtest.Options{})
	down.SetMode(xxljobtest.Down503)
	b := setup(t, opts{cfg: func(c *xxljob.Config) {
		c.AdminAddresses = []string{down.URL, c.AdminAddresses[0]}
	}})
	_, err := b.admin.WaitRegistrations(2, waitLong)
	require.NoError(t, err)
	require.Empty(t, down.Registrations())
}

func TestBeat(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	for _, body := range []string{`""`, ``, `{}`} {
		env, err := b.client.Post(t.Context(), "beat", []byte(body))
		require.NoError(t, err)
		require.Equal(t, `{"code":200}`, string(env.Raw), "body %q", body)
	}
	v34 := xxljobtest.NewClient("http://"+b.exec.Addr().String(), "", xxljobtest.V34)
	defer v34.Close()
	env, err := v34.Beat(t.Context())
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
}

func TestIdleBeat(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)

	env, err := b.client.IdleBeat(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw), "unknown job is idle")

	p := xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, p)
	g.waitStarted(t, p.LogID)
	env, err = b.client.IdleBeat(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, `{"code":500,"msg":"job thread is running or has trigger queue."}`, string(env.Raw))
	env, err = b.client.IdleBeat(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, "other job is idle")

	g.open()
	b.callback(t, p.LogID)
	waitFor(t, func() bool {
		env, err := b.client.IdleBeat(t.Context(), 1)
		return err == nil && env.Code == 200
	}, "job 1 idle again after its run")
}

func TestAccessToken(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{token: "s3cret", handlers: map[string]xxljob.Handler{"ok": okHandler("")},
		before: func(e *xxljob.Executor) { xxljob.SetAuthBurst(e, 1000) }})
	addr := "http://" + b.exec.Addr().String()
	const wrong = `{"code":500,"msg":"The access token is wrong."}`

	for _, token := range []string{"", "nope", "S3CRET", "s3cret2"} {
		c := xxljobtest.NewClient(addr, token, xxljobtest.V24)
		env, err := c.Beat(t.Context())
		require.NoError(t, err)
		require.Equal(t, wrong, string(env.Raw), "token %q", token)
		p := xxljobtest.Trigger(1, "ok", nextLogID())
		env, err = c.Run(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, wrong, string(env.Raw))
		env, err = c.Post(t.Context(), "nope", nil)
		require.NoError(t, err)
		require.Equal(t, wrong, string(env.Raw), "token is checked before the path")
		c.Close()
	}
	env, err := b.client.Beat(t.Context())
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))
}

func TestUnknownPathAndMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{token: "T"})
	base := "http://" + b.exec.Addr().String()

	for _, path := range []string{"/nope", "/run?x=1", "//run", "/RUN", "/run/", "/"} {
		env, err := b.client.Post(t.Context(), strings.TrimPrefix(path, "/"), []byte(`{}`))
		require.NoError(t, err)
		require.Equal(t, `{"code":500,"msg":"invalid request, uri-mapping(`+path+`) not found."}`, string(env.Raw))
	}
	for _, method := range []string{http.MethodGet, http.MethodPut, "PATCH"} {
		req, err := http.NewRequestWithContext(t.Context(), method, base+"/beat", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, `{"code":500,"msg":"invalid request, HttpMethod not support."}`, string(body), method)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("")}})
	common := []string{"", "  ", "null", `""`, "{", "[]", `[{"jobId":1}]`, `{"jobId":"x"}`, `{"jobId":1}garbage`, `{"jobId":1.5}`}
	specific := map[string][]string{
		"idleBeat": {`{"jobId":99999999999}`},
		"kill":     {`{"jobId":99999999999}`},
		"run":      {`{"jobId":1,"executorHandler":"ok"}`, `{"logId":-1}`, `{"logId":1,"logDateTime":-5}`, `{"logId":1,"executorTimeout":"1"}`},
		"log":      {`{"logDateTim":1}`, `{"logId":1,"logDateTim":-1}`, `{"logId":1,"fromLineNum":"x"}`, `{"logId":1,"logDateTim":1e300}`},
	}
	for path, extra := range specific {
		for _, body := range append(extra, common...) {
			env, err := b.client.Post(t.Context(), path, []byte(body))
			require.NoError(t, err)
			require.Equal(t, 500, env.Code, "%s %q", path, body)
			require.True(t, strings.HasPrefix(env.MsgString(), "request error:"), "%s %q: %s", path, body, env.Raw)
		}
	}
	env, err := b.client.Beat(t.Context())
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, "still serving")
}

func TestOversizedBody(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("")}})
	big := `{"jobId":1,"executorHandler":"ok","logId":1,"executorParams":"` + strings.Repeat("a", 5<<20) + `"}`

	// Through ServeHTTP, deterministic: a bare 413, as Netty's aggregator
	// in front of the Java executor answers, whether the length is declared
	// (refused before the token is looked at) or found when reading.
	for _, declared := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(big))
		if !declared {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		b.exec.ServeHTTP(rec, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "declared %v", declared)
		require.Empty(t, rec.Body.String())
		require.Equal(t, "0", rec.Header().Get("Content-Length"))
	}

	// Over HTTP, then the executor keeps serving.
	resp, err := http.Post("http://"+b.exec.Addr().String()+"/kill", "application/json", bytes.NewReader([]byte(big)))
	if err == nil { // the server may close the connection before the client finished writing
		_ = resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	env, err := b.client.Beat(t.Context())
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	require.Empty(t, b.admin.Callbacks(), "nothing ran")
}

func TestServeHTTPBeforeStart(t *testing.T) {
	t.Parallel()
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"}, AppName: "x", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, e.Register("ok", okHandler("")))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(`{"jobId":1,"executorHandler":"ok","logId":5}`)))
	require.Equal(t, `{"code":500,"msg":"executor is not started, trigger refused"}`, rec.Body.String())
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/beat", nil))
	require.Equal(t, `{"code":200}`, rec.Body.String())
	require.Nil(t, e.Addr())
	require.NoError(t, e.Shutdown(t.Context()))
	require.Error(t, e.Start(t.Context()), "no start after shutdown")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := xxljob.New(xxljob.Config{AccessToken: "  ", Port: 70000, AdminAddresses: []string{"ftp://x"}, ShutdownTimeout: -1})
	require.Error(t, err)
	for _, want := range []string{"AppName", "AdminAddresses", "AccessToken", "Port", "ShutdownTimeout"} {
		require.Contains(t, err.Error(), want)
	}
	_, err = xxljob.New(xxljob.Config{OpenWithoutToken: true, AppName: "x"})
	require.ErrorContains(t, err, "at least one admin address")

	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://a/xxl-job-admin"}, AppName: "x", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.Error(t, e.Register("", okHandler("")))
	require.Error(t, e.Register("h", nil))
	require.NoError(t, e.Register("h", okHandler("")))
	require.ErrorContains(t, e.Register("h", okHandler("")), "duplicate")
}

// TestNewRequiresToken: an empty AccessToken is refused unless
// OpenWithoutToken says so; an open executor listens and advertises on
// loopback unless told where.
func TestNewRequiresToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		cfg                 xxljob.Config
		wantErr             string
		wantListen, wantAdr string
	}{
		{name: "no token", cfg: xxljob.Config{},
			wantErr: "AccessToken: required (anyone who reaches the port could run and kill jobs); set OpenWithoutToken to serve without one, on loopback by default"},
		{name: "token", cfg: xxljob.Config{AccessToken: "T-0123456789abcdef", IP: "10.1.2.3"}, wantListen: ":9999", wantAdr: "http://10.1.2.3:9999/"},
		{name: "open", cfg: xxljob.Config{OpenWithoutToken: true, Port: 9123}, wantListen: "127.0.0.1:9123", wantAdr: "http://127.0.0.1:9123/"},
		{name: "open, IP set", cfg: xxljob.Config{OpenWithoutToken: true, IP: "10.1.2.3"}, wantListen: "127.0.0.1:9999", wantAdr: "http://10.1.2.3:9999/"},
		{name: "open, bound wide on purpose", cfg: xxljob.Config{OpenWithoutToken: true, ListenAddr: ":9999", IP: "10.1.2.3"}, wantListen: ":9999", wantAdr: "http://10.1.2.3:9999/"},
		{name: "open with a token is just a token", cfg: xxljob.Config{OpenWithoutToken: true, AccessToken: "T-0123456789abcdef", IP: "10.1.2.3"}, wantListen: ":9999", wantAdr: "http://10.1.2.3:9999/"},
		{name: "main needs a token even open", cfg: xxljob.Config{OpenWithoutToken: true, AdminVersion: xxljob.AdminMain},
			wantErr: "AccessToken: required by the main dialect"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.AdminAddresses, tc.cfg.AppName, tc.cfg.LogPath = []string{"http://127.0.0.1:1/xxl-job-admin"}, "x", t.TempDir()
			e, err := xxljob.New(tc.cfg)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			listen, addr := xxljob.Listening(e)
			require.Equal(t, tc.wantListen, listen)
			require.Equal(t, tc.wantAdr, addr)
		})
	}
}

// authCounter is an Observer that counts refused requests.
type authCounter struct {
	mu      sync.Mutex
	remotes []string
}

func (*authCounter) RunStarted(string, int, int64)                      {}
func (*authCounter) RunFinished(string, int, int64, int, time.Duration) {}
func (*authCounter) CallbackSent(int, error)                            {}
func (*authCounter) CallbackSpool(int)                                  {}
func (*authCounter) Registered(error)                                   {}

func (a *authCounter) AuthFailed(remote string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.remotes = append(a.remotes, remote)
}

func (a *authCounter) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.remotes)
}

// Many wrong tokens from one address: each is counted through the
// Observer, the log has one line for them, and after ten the address is
// answered 429 before any token is compared, until a second has passed.
// Before, 3,000 guesses took 0.5 s and left no trace.
func TestWrongTokensAreCountedLoggedAndSlowed(t *testing.T) {
	t.Parallel()
	const token = "T-0123456789abcdef"
	obs := &authCounter{}
	b := setup(t, opts{token: token, cfg: func(c *xxljob.Config) { c.Observer = obs }})
	url := "http://" + b.exec.Addr().String() + "/beat"
	send := func(tok string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		require.NoError(t, err)
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	codes := map[int]int{}
	start := time.Now()
	for i := range 200 {
		code, body := send(fmt.Sprintf("guess-%d", i))
		codes[code]++
		if code == http.StatusOK {
			require.Equal(t, `{"code":500,"msg":"The access token is wrong."}`, body)
		} else {
			require.Equal(t, http.StatusTooManyRequests, code)
			require.Contains(t, body, "too many failed access token checks")
		}
	}
	// Ten at once, and one more for each second the loop took (a slow,
	// loaded machine).
	compared := codes[http.StatusOK]
	require.True(t, compared >= 10 && compared <= 10+int(time.Since(start)/time.Second), "ten guesses are compared, %v", codes)
	require.Equal(t, 200-compared, codes[http.StatusTooManyRequests])
	require.Equal(t, compared, obs.count(), "every compared failure counted")
	require.Equal(t, 1, strings.Count(b.logs.String(), "authentication failed"), "one log line per address and minute")
	require.Contains(t, b.logs.String(), "surface=executor remote=127.0.0.1 failures=1")

	// Even the right token waits for the bucket, then passes.
	code, _ := send(token)
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Eventually(t, func() bool { c, _ := send(token); return c == http.StatusOK }, 3*time.Second, 100*time.Millisecond)
}
