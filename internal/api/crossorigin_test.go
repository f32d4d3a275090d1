package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/refunds"
)

// Cross-origin state changes are refused whatever the token, and JSON
// routes take only JSON bodies. Before, with api.token empty, a text/plain
// POST from another origin (no preflight) bulk-requeued parked dead
// letters and marked a refund paid "by" whom the page chose.
func TestCrossOriginStateChangesRefused(t *testing.T) {
	t.Parallel()
	const tok = "api-token-0123456789"
	for _, token := range []string{"", tok} {
		t.Run("token="+token, func(t *testing.T) {
			t.Parallel()
			letters := letterWorld(t)
			db := dbtest.New(t)
			_, err := db.ExecContext(context.Background(), `INSERT INTO payment_conflict (payment_id, order_no, pay_amount, paid_at, reason)
				VALUES ('wx-c', 'R-1', 20.00, NOW(3), 'late')`)
			require.NoError(t, err)
			s := New(Config{Token: token})
			s.MountDeadLetters(HomeOnly(letters))
			s.MountRefunds(HomeOnly(refunds.New(db.DB)))
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)

			tests := []struct {
				name, method, path, body string
				header                   map[string]string
				want                     int
				wantErr                  string
			}{
				{"text/plain from another origin", "POST", "/api/dead-letters/requeue?status=parked", "x",
					map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, 403, "cross-origin request refused"},
				{"no body from another origin", "POST", "/api/dead-letters/requeue?status=parked", "",
					map[string]string{"Origin": "https://evil.example"}, 403, "cross-origin request refused"},
				{"JSON, cross-site by Sec-Fetch-Site", "POST", "/api/refunds/wx-c/refunded", `{"note":"evil"}`,
					map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403, "cross-origin request refused"},
				{"JSON, same-site other origin", "DELETE", "/api/dead-letters/requeue", "",
					map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "cross-origin request refused"},
				{"text/plain from no browser", "POST", "/api/refunds/wx-c/refunded", `{"note":"x"}`,
					map[string]string{"Content-Type": "text/plain"}, 415, "the request body must be JSON"},
				{"form from no browser", "POST", "/api/refunds/wx-c/refunded", "note=x",
					map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "the request body must be JSON"},
				{"a read from another origin", "GET", "/api/dead-letters?status=parked", "",
					map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 200, ""},
			}
			for _, tc := range tests {
				req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
				require.NoError(t, err)
				for k, v := range tc.header {
					req.Header.Set(k, v)
				}
				if token != "" {
					req.Header.Set("X-Executor-Token", token)
				}
				resp, err := srv.Client().Do(req)
				require.NoError(t, err)
				raw, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, tc.want, resp.StatusCode, "%s: %s", tc.name, raw)
				require.Contains(t, string(raw), tc.wantErr, tc.name)
			}
			parked, err := letters.List(context.Background(), deadletters.Filter{Status: "parked"})
			require.NoError(t, err)
			require.Len(t, parked, 1, "the parked letter is still parked")
			var status string
			require.NoError(t, db.Get(&status, `SELECT refund_status FROM payment_conflict WHERE payment_id = 'wx-c'`))
			require.Equal(t, "owed", status)

			// The same change from the port's own origin, or from a client
			// that is not a browser, goes through.
			req, err := http.NewRequest("POST", srv.URL+"/api/refunds/wx-c/refunded", strings.NewReader(`{"note":"refund 1"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json; charset=utf-8")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("X-Executor-Token", token)
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.NoError(t, db.Get(&status, `SELECT refunded_by FROM payment_conflict WHERE payment_id = 'wx-c'`))
			require.Equal(t, "api", status, "recorded as the caller")
		})
	}
}

// The console refuses a cross-origin POST that a browser marks only with
// Sec-Fetch-Site (no Origin, no Referer): before, such a request passed its
// own Origin check.
func TestConsoleRefusesCrossSiteSignIn(t *testing.T) {
	t.Parallel()
	s := New(Config{})
	require.NoError(t, s.MountConsole(ConsoleConfig{Operators: []Operator{{"alice", aliceToken}}, DB: dbtest.New(t).DB}))
	for site, want := range map[string]int{"cross-site": http.StatusForbidden, "same-site": http.StatusForbidden,
		"same-origin": http.StatusSeeOther, "none": http.StatusSeeOther} {
		req := httptest.NewRequest("POST", "/console/signin", strings.NewReader("token="+aliceToken))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, site)
		if want == http.StatusForbidden {
			require.Empty(t, rec.Result().Cookies(), "%s: no session issued", site)
		}
	}
}
