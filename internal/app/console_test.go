package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/dbtest"
)

// serve's console offers the order sources: ?source=b reads b's database
// and looks an order up in b's order tables, a is mysql.dsn's.
func TestConsoleReadsEverySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	for _, stmt := range []string{`CREATE TABLE order_info_1 LIKE order_info`, `CREATE TABLE order_item_1 LIKE order_item`,
		`INSERT INTO order_info_1 (order_no, user_id, status, create_time, timeout_minutes) VALUES ('B-7', 1, 2, NOW(), 30)`} {
		_, err := other.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	const token = "alice-token-0123456789"
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, map[string]string{"EXECUTOR_API_CONSOLE_TOKENS": "alice:" + token},
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info, order_info_1"}]`, home.DSN, other.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()
	srv := api.New(api.Config{})
	require.NoError(t, mountConsole(srv, cfg, d, slog.New(slog.DiscardHandler)))
	hs := httptest.NewServer(srv)
	defer hs.Close()

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	hc := &http.Client{Jar: jar}
	res, err := hc.PostForm(hs.URL+"/console/signin", url.Values{"token": {token}})
	require.NoError(t, err)
	res.Body.Close()
	get := func(path string) (int, string) {
		res, err := hc.Get(hs.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, body := get("/console/orders/B-7?source=b")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "Found in the order table order_info_1 of order source b.")
	code, _ = get("/console/orders/B-7?source=a")
	require.Equal(t, http.StatusNotFound, code)
	code, body = get("/console/dead-letters?source=c")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "(the sources: a, b)")
}
