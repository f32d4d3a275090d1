package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/api"
)

func do(t *testing.T, h http.Handler, method, path, token, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Executor-Token", token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return rec, m
}

func TestTokenProtectsAllButProbes(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{Token: "s3cret"})
	s.Handle("GET /api/thing", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, 200, map[string]string{"ok": "yes"})
	}))
	s.HandlePublic("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("m 1\n")) }))

	rec, body := do(t, s, "GET", "/api/thing", "", "")
	require.Equal(t, 401, rec.Code)
	require.Contains(t, body["error"], "X-Executor-Token")
	rec, _ = do(t, s, "GET", "/api/thing", "s3cre", "")
	require.Equal(t, 401, rec.Code, "a prefix of the token is not the token")
	rec, _ = do(t, s, "GET", "/api/thing", "s3cret!", "")
	require.Equal(t, 401, rec.Code)
	rec, _ = do(t, s, "GET", "/api/thing", "s3cret", "")
	require.Equal(t, 200, rec.Code)

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		rec, _ = do(t, s, "GET", p, "", "")
		require.Equal(t, 200, rec.Code, p)
	}
	rec, _ = do(t, s, "GET", "/nope", "", "")
	require.Equal(t, 401, rec.Code, "unknown paths do not reveal themselves without a token")
	rec, body = do(t, s, "GET", "/nope", "s3cret", "")
	require.Equal(t, 404, rec.Code)
	require.Contains(t, body["error"], "no route")
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{})
	s.Handle("POST /api/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				api.WriteError(w, http.StatusRequestEntityTooLarge, "body over the limit")
				return
			}
			api.WriteError(w, 400, err.Error())
			return
		}
		api.WriteJSON(w, 200, v)
	}))
	big := `"` + strings.Repeat("x", api.MaxBodyBytes+10) + `"`
	rec, _ := do(t, s, "POST", "/api/echo", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	rec, _ = do(t, s, "POST", "/api/echo", "", `{"a":1}`)
	require.Equal(t, 200, rec.Code)
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{})
	var down bool
	s.AddReadyCheck("mysql", func(context.Context) error { return nil })
	s.AddReadyCheck("redis", func(context.Context) error {
		if down {
			return errors.New("dial tcp: connection refused")
		}
		return nil
	})
	rec, body := do(t, s, "GET", "/readyz", "", "")
	require.Equal(t, 200, rec.Code)
	require.Equal(t, true, body["ready"])
	down = true
	rec, body = do(t, s, "GET", "/readyz", "", "")
	require.Equal(t, 503, rec.Code)
	require.Equal(t, "dial tcp: connection refused", body["checks"].(map[string]any)["redis"])
	require.Equal(t, "ok", body["checks"].(map[string]any)["mysql"])
}

// /readyz needs no token, and a failed check's error names internal
// addresses and the database user: only a caller sending the API token
// reads them; others read "failed". A wrong token is not an
// authentication failure there (probes send none): no 401, no slowdown.
func TestReadyzDetailNeedsTheToken(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{Token: "s3cret-token-16ch"})
	s.AddReadyCheck("mysql", func(context.Context) error {
		return errors.New("dial tcp 10.0.3.7:3306: Access denied for user 'app'@'10.0.3.9'")
	})
	s.Handle("GET /api/thing", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, "ok") }))

	for range 30 {
		rec, body := do(t, s, "GET", "/readyz", "wrong", "")
		require.Equal(t, 503, rec.Code)
		require.Equal(t, map[string]any{"mysql": "failed"}, body["checks"])
	}
	rec, body := do(t, s, "GET", "/readyz", "", "")
	require.Equal(t, 503, rec.Code)
	require.Equal(t, map[string]any{"mysql": "failed"}, body["checks"])
	rec, body = do(t, s, "GET", "/readyz", "s3cret-token-16ch", "")
	require.Equal(t, 503, rec.Code)
	require.Equal(t, map[string]any{"mysql": "dial tcp 10.0.3.7:3306: Access denied for user 'app'@'10.0.3.9'"}, body["checks"])
	rec, _ = do(t, s, "GET", "/api/thing", "s3cret-token-16ch", "")
	require.Equal(t, 200, rec.Code, "the wrong tokens at /readyz did not slow this address down")
}

// An optional check (the admin registration) runs only when the probe asks
// for it, so its failure never fails the plain probe.
func TestReadyzOptionalCheck(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{})
	s.AddReadyCheck("mysql", func(context.Context) error { return nil })
	s.AddOptionalReadyCheck("registry", func(context.Context) error { return errors.New("not registered with any admin yet") })

	rec, body := do(t, s, "GET", "/readyz", "", "")
	require.Equal(t, 200, rec.Code)
	require.Equal(t, map[string]any{"mysql": "ok"}, body["checks"])

	rec, body = do(t, s, "GET", "/readyz?registry=1", "", "")
	require.Equal(t, 503, rec.Code)
	require.Equal(t, map[string]any{"mysql": "ok", "registry": "not registered with any admin yet"}, body["checks"])

	rec, _ = do(t, s, "GET", "/readyz?registry=0", "", "")
	require.Equal(t, 200, rec.Code, "registry=0 leaves it out")

	rec, body = do(t, s, "GET", "/readyz?regsitry=1", "", "") //nolint:misspell // a misspelt check name is the point
	require.Equal(t, 400, rec.Code)
	require.Contains(t, body["error"], `unknown check "regsitry"; optional checks: [registry]`) //nolint:misspell // the misspelt name echoed
}

func TestStartAndShutdown(t *testing.T) {
	t.Parallel()
	s := api.New(api.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, s.Start(t.Context()))
	resp, err := http.Get("http://" + s.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.NoError(t, s.Stop(context.Background()))
}
