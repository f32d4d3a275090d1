package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders/deadletters"
)

// letterWorld is the operators' view over ordertest.Letters' dead letters,
// one in every status.
func letterWorld(t *testing.T) *deadletters.Ops {
	t.Helper()
	db := dbtest.New(t)
	ordertest.Letters(t, db.DB)
	return deadletters.New(db.DB)
}

// The HTTP API over the same letters: list with filters and paging, one
// letter, requeue, and the error answers.
func TestDeadLetterAPI(t *testing.T) {
	t.Parallel()
	srv := letterServer(t)
	call := func(method, path string) (int, map[string]any) {
		t.Helper()
		return callJSON(t, method, srv.URL+path)
	}

	code, m := call("GET", "/api/dead-letters?status=waiting&stage=close")
	require.Equal(t, http.StatusOK, code)
	list := m["deadLetters"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "W-2", list[0].(map[string]any)["orderNo"])
	require.EqualValues(t, 0, m["nextBefore"])

	code, m = call("GET", "/api/dead-letters?limit=2")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, m["deadLetters"].([]any), 2)
	require.NotZero(t, m["nextBefore"])

	code, m = call("GET", "/api/dead-letters/P-1")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "parked", m["status"])
	require.EqualValues(t, 8, m["attempts"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$`, m["nextRetryAt"])

	code, m = call("GET", "/api/dead-letters/W-1?stage=payment")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "payment", m["stage"])

	code, m = call("POST", "/api/dead-letters/P-1/requeue")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "waiting", m["status"])

	code, m = call("POST", "/api/dead-letters/R-1/requeue")
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, m["error"], "resolved")
	require.Equal(t, "resolved", m["deadLetter"].(map[string]any)["status"])

	for _, tc := range []struct {
		method, path string
		code         int
		field, msg   string
	}{
		{"GET", "/api/dead-letters/NOPE", 404, "orderNo", `no close dead letter for order "NOPE"`},
		{"POST", "/api/dead-letters/NOPE/requeue?stage=payment", 404, "orderNo", `no payment dead letter for order "NOPE"`},
		{"GET", "/api/dead-letters?status=lost", 400, "status", `status "lost" is not waiting, parked or resolved`},
		{"GET", "/api/dead-letters?limit=0", 400, "limit", `limit "0" is not a positive integer`},
		{"GET", "/api/dead-letters?limit=5000", 400, "limit", "limit 5000 is not in 1..1000"},
		{"GET", "/api/dead-letters?before=x", 400, "before", `before "x" is not a non-negative integer`},
		{"GET", "/api/dead-letters?stauts=waiting", 400, "stauts", `unknown query parameter "stauts"`},
		{"GET", "/api/dead-letters/P-1?x=1", 400, "x", `unknown query parameter "x"`},
		{"GET", "/api/dead-letters/" + strings.Repeat("x", 65), 400, "orderNo", "order number must be 1-64 bytes"},
	} {
		code, m := call(tc.method, tc.path)
		require.Equal(t, tc.code, code, tc.path)
		require.Equal(t, tc.field, m["field"], tc.path)
		require.Contains(t, m["error"], tc.msg, tc.path)
	}
}

// callJSON makes an HTTP request and decodes the JSON object it answers.
func callJSON(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json; charset=utf-8", res.Header.Get("Content-Type"))
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), string(body))
	return res.StatusCode, m
}

// letterServer serves the dead-letter API over letterWorld's letters.
func letterServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := New(Config{})
	s.MountDeadLetters(HomeOnly(letterWorld(t)))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// POST /api/dead-letters/requeue is RequeueMatching over HTTP.
func TestDeadLetterAPIBulkRequeue(t *testing.T) {
	t.Parallel()
	srv := letterServer(t)
	post := func(query string) (int, map[string]any) {
		t.Helper()
		return callJSON(t, "POST", srv.URL+"/api/dead-letters/requeue?"+query)
	}
	code, m := post("status=waiting&errorLike=coupon&dryRun=true")
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, map[string]any{"matched": 1.0, "requeued": 0.0, "dryRun": true}, m)
	code, m = post("status=parked&since=1h")
	require.Equal(t, http.StatusOK, code, m)
	require.EqualValues(t, 1, m["matched"])
	require.EqualValues(t, 1, m["requeued"])
	require.NotEmpty(t, m["since"])

	for query, field := range map[string]string{"": "status", "status=resolved": "status", "status=parked&since=soon": "since",
		"status=parked&dryRun=maybe": "dryRun", "status=parked&bogus=1": "bogus"} {
		code, m := post(query)
		require.Equal(t, http.StatusBadRequest, code, query)
		require.Equal(t, field, m["field"], query)
	}
}

// ?source= picks the order database a dead-letter route reads and changes:
// without it mysql.dsn's, an unknown name is a 400 listing the sources.
func TestDeadLetterAPISource(t *testing.T) {
	t.Parallel()
	home, other := dbtest.New(t), dbtest.New(t)
	ordertest.Letters(t, home.DB) // P-1 parked, among others
	_, err := other.ExecContext(context.Background(), `INSERT INTO order_dead_letter
		(order_no, order_table, stage, status, status_reason, last_error, attempts, next_retry_at) VALUES
		('B-1', 'order_info_1', 'close', 'parked', 'parked after 8 failed attempts', 'boom', 8, NOW(3)),
		('B-2', 'order_info_1', 'close', 'parked', 'parked after 8 failed attempts', 'boom', 8, NOW(3))`)
	require.NoError(t, err)
	s := New(Config{})
	homeView := deadletters.New(home.DB)
	s.MountDeadLetters(Sourced[*deadletters.Ops]{Home: homeView,
		By: map[string]*deadletters.Ops{"a": homeView, "b": deadletters.New(other.DB)}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	call := func(method, path string) (int, map[string]any) {
		t.Helper()
		return callJSON(t, method, srv.URL+path)
	}
	orderNos := func(m map[string]any) []string {
		var nos []string
		for _, dl := range m["deadLetters"].([]any) {
			nos = append(nos, dl.(map[string]any)["orderNo"].(string))
		}
		return nos
	}

	code, m := call("GET", "/api/dead-letters?status=parked&source=b")
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, []string{"B-2", "B-1"}, orderNos(m))
	code, m = call("GET", "/api/dead-letters?status=parked")
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, []string{"P-1"}, orderNos(m))
	_, m = call("GET", "/api/dead-letters?status=parked&source=a")
	require.Equal(t, []string{"P-1"}, orderNos(m), "a is on mysql.dsn's database")

	code, _ = call("GET", "/api/dead-letters/B-1")
	require.Equal(t, http.StatusNotFound, code, "B-1 is not in mysql.dsn's database")
	code, m = call("GET", "/api/dead-letters/B-1?source=b&stage=close")
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, "order_info_1", m["orderTable"])

	code, m = call("POST", "/api/dead-letters/B-1/requeue?source=b")
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, "waiting", m["status"])
	require.Equal(t, "waiting", statusOf(t, other, "order_dead_letter", "B-1"))
	require.Equal(t, "parked", statusOf(t, home, "order_dead_letter", "P-1"))

	code, m = call("POST", "/api/dead-letters/requeue?status=parked&source=b")
	require.Equal(t, http.StatusOK, code, m)
	require.EqualValues(t, 1, m["requeued"], "B-2 alone")
	require.Equal(t, "waiting", statusOf(t, other, "order_dead_letter", "B-2"))
	require.Equal(t, "parked", statusOf(t, home, "order_dead_letter", "P-1"))

	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/dead-letters?source=c"},
		{"GET", "/api/dead-letters/B-1?source=c"},
		{"POST", "/api/dead-letters/B-1/requeue?source=c"},
		{"POST", "/api/dead-letters/requeue?status=parked&source=c"},
	} {
		code, m := call(tc.method, tc.path)
		require.Equal(t, http.StatusBadRequest, code, tc.path)
		require.Equal(t, "source", m["field"], tc.path)
		require.Equal(t, `source "c" is not an order source (the sources: a, b)`, m["error"], tc.path)
	}
	require.Equal(t, "waiting", statusOf(t, other, "order_dead_letter", "B-1"))
	require.Equal(t, "parked", statusOf(t, home, "order_dead_letter", "P-1"))
}
