package api_test

// Hostile input on the API port: wrong tokens, unknown paths and
// methods, oversized and malformed bodies, huge headers and slow-loris
// connections each get a clear failure answer, protected handlers never run
// without the token, and the server keeps serving.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/api"
)

const token = "0123456789abcdef0123456789abcdef"

type hostileAPI struct {
	srv   *api.Server
	base  string
	calls atomic.Int64 // protected handler runs
}

// startHostile starts the API port on loopback with one protected JSON
// route that decodes its body, and a public probe.
func startHostile(t *testing.T) *hostileAPI {
	t.Helper()
	h := &hostileAPI{srv: api.New(api.Config{Addr: "127.0.0.1:0", Token: token})}
	api.SetAuthBurst(h.srv, 1<<20) // guessing is slowed: TestWrongTokensAreCountedLoggedAndSlowed
	h.srv.Handle("POST /api/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		var v map[string]any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				api.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is larger than %d bytes", mb.Limit))
				return
			}
			api.WriteError(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]int{"keys": len(v)})
	}))
	h.srv.Handle("GET /api/thing/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		api.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	}))
	require.NoError(t, h.srv.Start(t.Context()))
	h.base = "http://" + h.srv.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, h.srv.Stop(ctx))
		http.DefaultClient.CloseIdleConnections()
	})
	return h
}

func (h *hostileAPI) do(t *testing.T, method, path string, hdr http.Header, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.base+path, body)
	require.NoError(t, err)
	if hdr != nil {
		req.Header = hdr
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (h *hostileAPI) stillServing(t *testing.T) {
	t.Helper()
	status, body := h.do(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"status":"ok"}`, body)
}

func withToken(v string) http.Header { return http.Header{"X-Executor-Token": {v}} }

const denied = `{"error":"missing or wrong token in header X-Executor-Token"}`

func TestHostileAPITokens(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	cases := map[string]http.Header{
		"missing":                    {},
		"empty":                      withToken(""),
		"one byte":                   withToken("0"),
		"prefix, one byte short":     withToken(token[:len(token)-1]),
		"same length, last differs":  withToken(token[:len(token)-1] + "X"),
		"same length, first differs": withToken("X" + token[1:]),
		"one byte longer":            withToken(token + "f"),
		"upper case":                 withToken(strings.ToUpper(token)),
		"UTF-8 lookalike":            withToken(strings.Replace(token, "a", "а", 1)),
		"8 KiB":                      withToken(strings.Repeat(token, 256)),
		"bearer scheme":              {"Authorization": {"Bearer " + token}},
		"other header name":          {"X-Executor-Tokens": {token}},
		"wrong first, right second":  {"X-Executor-Token": {"nope", token}},
	}
	for name, hdr := range cases {
		for _, tc := range []struct{ method, path string }{
			{http.MethodPost, "/api/echo"}, {http.MethodGet, "/api/thing/1"}, {http.MethodGet, "/nowhere"},
			{http.MethodDelete, "/api/echo"}, {http.MethodGet, "/debug/pprof/"},
		} {
			status, body := h.do(t, tc.method, tc.path, hdr.Clone(), strings.NewReader(`{"a":1}`))
			require.Equal(t, http.StatusUnauthorized, status, "%s %s %s", name, tc.method, tc.path)
			require.JSONEq(t, denied, body, name)
		}
	}
	status, _ := h.do(t, http.MethodGet, "/api/thing/1", withToken(strings.Repeat("x", 100<<10)), nil)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status, "a 100 KiB token never reaches the check")
	// The token in the query string is not a token.
	status, _ = h.do(t, http.MethodGet, "/api/thing/1?X-Executor-Token="+token, nil, nil)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Zero(t, h.calls.Load(), "a protected handler ran without the token")

	status, body := h.do(t, http.MethodGet, "/api/thing/7", withToken(token), nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"id":"7"}`, body)
	h.stillServing(t)
}

func TestHostileAPIPathsAndMethods(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	// Without the token nothing but the probes answers 2xx, whatever the
	// method or the path's spelling; redirects to the cleaned path are fine.
	for _, path := range []string{"/api/echo", "/api/echo/", "//api/echo", "/api/./echo", "/api/x/../echo",
		"/API/ECHO", "/api/echo%00", "/api/%65cho", "/api/thing/..%2f..%2fdebug", "/debug/pprof/cmdline",
		"/healthz/", "/" + strings.Repeat("a", 4000)} {
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, "PROPFIND"} {
			status, _ := h.do(t, method, path, http.Header{}, strings.NewReader(`{}`))
			require.Contains(t, []int{http.StatusUnauthorized, http.StatusMovedPermanently, http.StatusTemporaryRedirect,
				http.StatusPermanentRedirect, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed}, status, "%s %s", method, path)
		}
	}
	require.Zero(t, h.calls.Load(), "a protected handler ran without the token")
	// With the token: unknown routes are 404 with a message naming them;
	// a route's path with another method is 405 with the methods it takes
	// (it was 404: the catch-all that answers 401 took every method).
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/nowhere"}, {http.MethodGet, "/api/echo/"}, {http.MethodDelete, "/api/thing/1/x"},
	} {
		status, body := h.do(t, tc.method, tc.path, withToken(token), nil)
		require.Equal(t, http.StatusNotFound, status, "%s %s", tc.method, tc.path)
		require.JSONEq(t, fmt.Sprintf(`{"error":"no route for %s %s"}`, tc.method, tc.path), body)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/api/echo", "POST"}, {http.MethodHead, "/api/echo", "POST"}, {"PROPFIND", "/api/echo", "POST"},
		{http.MethodPut, "/api/thing/1", "GET, HEAD"}, {http.MethodPost, "/api/thing/%27%3B", "GET, HEAD"},
		{http.MethodDelete, "/healthz", "GET, HEAD"}, {http.MethodPost, "/readyz", "GET, HEAD"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, h.base+tc.path, nil)
		require.NoError(t, err)
		req.Header = withToken(token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		if tc.method != http.MethodHead {
			require.JSONEq(t, fmt.Sprintf(`{"error":"%s is not allowed on %s: use %s"}`, tc.method, req.URL.Path, tc.allow), string(b))
		}
	}
	// Path values are data, not paths.
	status, body := h.do(t, http.MethodGet, "/api/thing/%27%3B%20DROP%20TABLE%20x%3B--", withToken(token), nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"id":"'; DROP TABLE x;--"}`, body)
	h.stillServing(t)
}

func TestHostileAPIBodies(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	hdr := func() http.Header {
		h := withToken(token)
		h.Set("Content-Type", "application/json")
		return h
	}
	cases := []struct {
		name   string
		body   string
		status int
		prefix string
	}{
		{"1 MiB + 1", `{"a":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, `{"error":"body is larger than 1048576 bytes"}`},
		{"nested 100000 deep", `{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, http.StatusBadRequest, `{"error":"body: `},
		{"40000 keys", "{" + strings.TrimSuffix(strings.Repeat(`"k":1,`, 40000), ",") + "}", http.StatusOK, `{"keys":1}`},
		{"not JSON", "\xff\xfe<xml/>", http.StatusBadRequest, `{"error":"body: invalid character`},
		{"empty", "", http.StatusBadRequest, `{"error":"body: EOF"}`},
	}
	for _, tc := range cases {
		start := time.Now()
		status, body := h.do(t, http.MethodPost, "/api/echo", hdr(), strings.NewReader(tc.body))
		require.Equal(t, tc.status, status, "%s: %.200s", tc.name, body)
		require.True(t, strings.HasPrefix(body, tc.prefix), "%s: %.200s", tc.name, body)
		require.Less(t, time.Since(start), 2*time.Second, tc.name)
	}
	// A chunked body without end: the handler stops at the limit.
	pr, pw := io.Pipe()
	var sent atomic.Int64
	go func() {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent.Load() < 100<<20 {
			n, err := pw.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.base+"/api/echo", io.MultiReader(strings.NewReader(`{"a":"`), pr))
	require.NoError(t, err)
	req.Header = hdr()
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(b))
	}
	pr.CloseWithError(io.ErrClosedPipe)
	require.Less(t, sent.Load(), int64(30<<20), "the server read far past its limit")
	h.stillServing(t)
}

// Slow-loris: connections that trickle their headers are cut by the
// ReadHeaderTimeout (5 s, fixed in Start); meanwhile the port serves.
func TestHostileAPISlowLoris(t *testing.T) {
	t.Parallel()
	h := startHostile(t)
	const conns = 32
	lived := make([]time.Duration, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			start := time.Now()
			c, err := net.Dial("tcp", h.srv.Addr().String())
			if err != nil {
				lived[i] = -1
				return
			}
			defer c.Close()
			_, _ = io.WriteString(c, "GET /api/thing/1 HTTP/1.1\r\nHost: x\r\nX-Executor-Token: ")
			buf := make([]byte, 256)
			for time.Since(start) < 15*time.Second {
				if _, err := c.Write([]byte("0")); err != nil {
					break
				}
				_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				n, err := c.Read(buf)
				var ne net.Error
				if n > 0 || (err != nil && (!errors.As(err, &ne) || !ne.Timeout())) {
					break
				}
			}
			lived[i] = time.Since(start)
		})
	}
	for range 10 {
		time.Sleep(300 * time.Millisecond)
		h.stillServing(t)
	}
	wg.Wait()
	for i, d := range lived {
		require.Positive(t, d, "conn %d", i)
		require.Less(t, d, 8*time.Second, "slow connection %d lived %s: the header timeout did not hold", i, d)
	}
	require.Zero(t, h.calls.Load())
	h.stillServing(t)
}

// Whatever the method, path, token and body, a protected handler runs only
// with the right token, every answer is JSON (or a redirect to the cleaned
// path), and nothing panics.
func FuzzAPIServeHTTP(f *testing.F) {
	for _, s := range []struct{ method, path, tok, body string }{
		{"POST", "/api/echo", token, `{"a":1}`}, {"GET", "/healthz", "", ""}, {"GET", "/readyz", "x", ""},
		{"DELETE", "/api/thing/1", token[:5], ""}, {"GET", "//api/../api/thing/%2e%2e", token, ""},
		{"PROPFIND", "/debug/pprof/", "", ""}, {"POST", "/api/echo", token, `{"a":` + strings.Repeat("[", 200)},
	} {
		f.Add(s.method, s.path, s.tok, []byte(s.body))
	}
	var calls atomic.Int64
	s := api.New(api.Config{Token: token})
	s.Handle("POST /api/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		api.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}))
	s.Handle("GET /api/thing/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		api.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	}))
	f.Fuzz(func(t *testing.T, method, path, tok string, body []byte) {
		req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(string(body)))
		if err != nil || req.URL.Host != "x" {
			return // not a request a client can send
		}
		req.Header.Set("X-Executor-Token", tok)
		before := calls.Load()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		ran := calls.Load() > before
		if ran && tok != token {
			t.Fatalf("%s %q ran a protected handler with token %q", method, path, tok)
		}
		switch {
		case rec.Code >= 300 && rec.Code < 400: // ServeMux redirects to the cleaned path
		case !json.Valid(rec.Body.Bytes()):
			t.Fatalf("%s %q: answer %d is not JSON: %q", method, path, rec.Code, rec.Body.String())
		}
	})
}
