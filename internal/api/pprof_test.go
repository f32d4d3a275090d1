package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/api"
)

// Go's pprof is off unless configured, and behind the token when on.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	off := api.New(api.Config{Token: "s3cret"})
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		rec, _ := do(t, off, "GET", p, "s3cret", "")
		require.Equal(t, 404, rec.Code, "%s is not served by default", p)
	}

	on := api.New(api.Config{Token: "s3cret", Pprof: true})
	rec, _ := do(t, on, "GET", "/debug/pprof/", "", "")
	require.Equal(t, 401, rec.Code, "pprof needs the token")
	rec, _ = do(t, on, "GET", "/debug/pprof/", "s3cret", "")
	require.Equal(t, 200, rec.Code)
	require.Contains(t, rec.Body.String(), "goroutine")
	rec, _ = do(t, on, "GET", "/debug/pprof/cmdline", "s3cret", "")
	require.Equal(t, 200, rec.Code)
}
