package api

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// A console path with a method it does not take was 404 "no console page"
// (its catch-all took every method) and a GET of sign-out a 403: now 405
// with Allow, and nothing runs. Unknown paths stay 404.
func TestConsoleWrongMethods(t *testing.T) {
	t.Parallel()
	w := newConsoleWorld(t)
	b := w.browser(t)
	b.signIn(aliceToken)
	csrf := url.Values{"csrf": {b.csrf()}}
	letter := "/console/dead-letters/" + itoa(w.ids["O-1"])
	before := operatorState(t, w)
	for _, tc := range []struct {
		method, path string
		form         url.Values
		allow        string
	}{
		{"GET", letter + "/requeue", nil, "POST"},
		{"GET", "/console/tasks/task-failed/cancel", nil, "POST"},
		{"PUT", "/console/tasks/task-failed/requeue", nil, "POST"},
		{"GET", "/console/outbox/1/requeue", nil, "POST"},
		{"GET", "/console/refunds/wx-late-1/refunded", nil, "POST"},
		{"DELETE", "/console/tasks/task-failed", nil, "GET, HEAD"},
		{"POST", "/console/dead-letters", csrf, "GET, HEAD"},
		{"POST", letter, csrf, "GET, HEAD"},
		{"GET", "/console/signout", nil, "POST"},
	} {
		p := b.do(tc.method, tc.path, tc.form)
		require.Equal(t, http.StatusMethodNotAllowed, p.status, "%s %s: %.300s", tc.method, tc.path, p.body)
		require.Equal(t, tc.allow, p.header.Get("Allow"), "%s %s", tc.method, tc.path)
	}
	require.Equal(t, before, operatorState(t, w), "a refused request changed something")
	require.Equal(t, http.StatusOK, b.get("/console/").status, "GET /console/signout signed out")
	for _, path := range []string{"/console/nowhere", letter + "/x", "/console/tasks/task-failed/requeue/x"} {
		p := b.get(path)
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.Empty(t, p.header.Get("Allow"), path)
	}
}
