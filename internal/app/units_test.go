package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// Open builds a unit per order table of order.sources, in order, each
// named by its source; a source that does not answer at start is logged
// and its units built all the same, so the others can close.
func TestOpenBuildsEveryUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	createTables(t, home, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_item_1 LIKE order_item",
		"CREATE TABLE order_info_2 LIKE order_info", "CREATE TABLE order_item_2 LIKE order_item")
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: "order_info, order_info_{1..2}"}, {name: b, dsn: %q, tables: order_info}, {name: gone, dsn: %q, tables: order_info}]`,
			home.DSN, other.DSN, deadDSN(t))))
	require.NoError(t, err)
	var logged syncbuf.Buffer
	d, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
	require.NoError(t, err)
	defer d.Close()
	var names []string
	for _, u := range d.HandlerDeps().Units {
		names = append(names, u.Source()+"/"+u.Table())
	}
	require.Equal(t, []string{"a/order_info", "a/order_info_1", "a/order_info_2", "b/order_info", "gone/order_info"}, names)
	require.Equal(t, d.HandlerDeps().Units, d.HandlerDeps().RetryUnits, "mysql.dsn is source a's: its letters are a's")
	require.Len(t, d.unitDBs, 3, "a pool per source")
	require.Contains(t, logged.String(), `msg="order source does not answer; its units fail until it does" source=gone`)
	names = nil
	for _, l := range d.HandlerDeps().LifecycleUnits {
		names = append(names, l.Source()+"/"+l.Table())
	}
	require.Equal(t, []string{"a/order_info", "a/order_info_1", "a/order_info_2", "b/order_info", "gone/order_info"}, names,
		"the lifecycle jobs have the same units")
}

// A source whose server answers with a refusal (a wrong password) is
// logged as refusing, with the hint of what to check, not as a database
// that does not answer: waiting will not fix it. The executor starts, and
// the other sources close.
func TestOpenLogsARefusedSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	mc, err := mysql.ParseDSN(other.NewUser(t, "SELECT ON *"))
	require.NoError(t, err)
	mc.Passwd = "wrong"
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: denied, dsn: %q, tables: order_info}]`, home.DSN, mc.FormatDSN())))
	require.NoError(t, err)
	var logged syncbuf.Buffer
	d, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
	require.NoError(t, err)
	defer d.Close()
	require.Len(t, d.HandlerDeps().Units, 2)
	require.Contains(t, logged.String(), `msg="order source refuses the executor's user; its units fail until it lets it in" source=denied`)
	require.Contains(t, logged.String(), "Error 1045 (28000): Access denied for user")
	require.Contains(t, logged.String(), `hint="the database user may not use this database: check the DSN's user, password and grants"`)
	require.NotContains(t, logged.String(), "does not answer")
}

// createTables runs DDL in db.
func createTables(t *testing.T, db *dbtest.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		_, err := db.ExecContext(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// The start-up check verifies every source's order tables: one lacking an
// index the jobs use refuses the start, naming the source and the table
// with the statement that fixes it, as for mysql.dsn's database; a source
// that does not answer is logged and the executor starts.
func TestOpenChecksEverySourcesTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	createTables(t, other, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_item_1 LIKE order_item",
		"ALTER TABLE order_info_1 DROP INDEX idx_status_pay_time")
	open := func(sources string) (string, error) {
		cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil, sources))
		require.NoError(t, err)
		var logged syncbuf.Buffer
		d, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
		if d != nil {
			d.Close()
		}
		return logged.String(), err
	}
	_, err := open(fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info, order_info_{1..2}"}]`,
		home.DSN, other.DSN))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "order source b: the order tables listed in order.sources are not what the executor needs (3 to fix;")
	require.Contains(t, msg, "\n  index order_info_1.idx_status_pay_time is missing; fix: ALTER TABLE order_info_1 ADD KEY idx_status_pay_time (status, pay_time)")
	require.Contains(t, msg, "\n  table order_info_2 is missing; fix: CREATE TABLE order_info_2 LIKE order_info")

	logged, err := open(fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: gone, dsn: %q, tables: "order_info_{0..1}"}]`,
		home.DSN, deadDSN(t)))
	require.NoError(t, err, "a source down does not stop the start")
	require.Contains(t, logged, `msg="order source does not answer; its units fail until it does" source=gone`)
}

// deadLetterRetryJob's units: mysql.dsn's Closer alone without
// order.sources; the units with it, and mysql.dsn's Closer after them
// when mysql.dsn is no source's database (its delayed-task closes write
// letters there).
func TestRetryUnits(t *testing.T) {
	t.Parallel()
	home, other := dbtest.New(t), dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer := func(db *dbtest.DB, source string) *orders.Closer {
		c, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{SourceName: source})
		require.NoError(t, err)
		return c
	}
	homeCloser, unit := closer(home, ""), closer(other, "s")
	// home's DSN written without what the executor adds anyway: the
	// same database, so no unit of its own.
	mc, err := mysql.ParseDSN(home.DSN)
	require.NoError(t, err)
	mc.ParseTime = false
	for _, c := range []struct {
		sources string
		want    []*orders.Closer
	}{
		{"", []*orders.Closer{homeCloser}},
		{fmt.Sprintf(`[{name: s, dsn: %q, tables: order_info}]`, other.DSN), []*orders.Closer{unit, homeCloser}},
		{fmt.Sprintf(`[{name: s, dsn: %q, tables: order_info}]`, home.DSN), []*orders.Closer{unit}},
		{fmt.Sprintf(`[{name: s, dsn: %q, tables: order_info}]`, mc.FormatDSN()), []*orders.Closer{unit}},
	} {
		env := map[string]string{"MYSQL_DSN": home.DSN, "ORDER_SOURCES": c.sources}
		cfg, err := config.LoadWith(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok && v != "" })
		require.NoError(t, err)
		units := []*orders.Closer{homeCloser}
		if c.sources != "" {
			units = []*orders.Closer{unit}
		}
		got, err := RetryUnits(cfg, homeCloser, units)
		require.NoError(t, err)
		require.Equal(t, c.want, got, c.sources)
	}
}

// deadDSN is a DSN of a port nothing answers on.
func deadDSN(t *testing.T) string {
	return fmt.Sprintf("root@tcp(%s)/x?timeout=1s", deadAddr(t))
}

// sourcesEnv is the environment of a process on home with order.sources
// sources (one line of YAML), a Redis prefix of the test's own and extra.
func sourcesEnv(t *testing.T, home string, extra map[string]string, sources string) func(string) (string, bool) {
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": home, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:", "ORDER_SOURCES": sources}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// /readyz?sources=1 pings every order source's database beside the API
// port's own checks: a source refusing the executor's user fails it,
// naming the source, while the plain probe stays ready (one database down
// stops only its units' closes).
func TestReadyzSourcesChecksEverySource(t *testing.T) {
	t.Parallel()
	home, other, third := dbtest.New(t), dbtest.New(t), dbtest.New(t)
	mc, err := mysql.ParseDSN(other.NewUser(t, "SELECT ON *"))
	require.NoError(t, err)
	mc.Passwd = "wrong"
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: denied, dsn: %q, tables: order_info}, {name: c, dsn: %q, tables: order_info}]`,
			home.DSN, mc.FormatDSN(), third.DSN)))
	require.NoError(t, err)
	hs := apiServerOf(t, cfg)

	probe := func(query string) (int, map[string]string) {
		t.Helper()
		res, err := http.Get(hs.URL + "/readyz" + query)
		require.NoError(t, err)
		defer res.Body.Close()
		var r struct {
			Checks map[string]string `json:"checks"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&r))
		return res.StatusCode, r.Checks
	}
	code, checks := probe("")
	require.Equal(t, http.StatusOK, code, checks)
	require.NotContains(t, checks, "sources")
	code, checks = probe("?sources=1")
	require.Equal(t, http.StatusServiceUnavailable, code, checks)
	require.Contains(t, checks["sources"], "order source denied: ")
	require.Contains(t, checks["sources"], "Access denied for user")
	require.NotContains(t, checks["sources"], "order source c")
	require.NotContains(t, checks["sources"], "order source a")
}
