package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/syncbuf"
)

// Many wrong tokens from one address on the API port and at the console's
// sign-in: each counted through AuthFailedFunc with its surface, one log
// line per surface and address, and after ten the address is answered 429
// before any token is compared. Before, 2,000 console guesses took 0.4 s
// and 3,000 API guesses 0.5 s, none logged or counted.
func TestWrongTokensAreCountedLoggedAndSlowed(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	var mu sync.Mutex
	counted := map[string]int{}
	s := New(Config{Token: "api-token-0123456789", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		AuthFailedFunc: func(surface string) { mu.Lock(); counted[surface]++; mu.Unlock() }})
	require.NoError(t, s.MountConsole(ConsoleConfig{Operators: []Operator{{"alice", aliceToken}}, DB: dbtest.New(t).DB}))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	tests := []struct {
		surface string
		send    func(guess string) *http.Request
	}{
		{"api", func(guess string) *http.Request {
			req, _ := http.NewRequest("GET", srv.URL+"/api/anything", nil)
			req.Header.Set("X-Executor-Token", guess)
			return req
		}},
		{"console", func(guess string) *http.Request {
			req, _ := http.NewRequest("POST", srv.URL+"/console/signin", strings.NewReader(url.Values{"token": {guess}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}},
	}
	counts := map[string]int{}
	for _, tc := range tests {
		codes := map[int]int{}
		start := time.Now()
		for i := range 100 {
			resp, err := srv.Client().Do(tc.send(fmt.Sprintf("guess-%016d", i)))
			require.NoError(t, err)
			resp.Body.Close()
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				require.NotEmpty(t, resp.Header.Get("Retry-After"), tc.surface)
			}
		}
		// Ten at once, and one more for each second the loop took.
		refused := codes[http.StatusUnauthorized]
		require.True(t, refused >= 10 && refused <= 10+int(time.Since(start)/time.Second), "%s: %v", tc.surface, codes)
		require.Equal(t, 100-refused, codes[http.StatusTooManyRequests], tc.surface)
		counts[tc.surface] = refused
		require.Equal(t, 1, strings.Count(logs.String(), "surface="+tc.surface), "one line per address and minute:\n%s", logs.String())
		require.Contains(t, logs.String(), "surface="+tc.surface+" remote=127.0.0.1 failures=1")
	}
	require.Equal(t, counts, counted, "every refused token counted, with its surface")

	// The right token waits for the bucket too, then passes.
	req, _ := http.NewRequest("GET", srv.URL+"/api/anything", nil)
	req.Header.Set("X-Executor-Token", "api-token-0123456789")
	require.Eventually(t, func() bool {
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound // past the token: no such route
	}, 3*time.Second, 100*time.Millisecond)
}
