package orders_test

import (
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/closesql"
)

// The scan walks idx_status_create_time, and the dead-letter retry its
// idx_table_status_retry, in key order: no full scan, no sort.
func TestScanUsesIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Seed(t, orderdemo.Spec{Orders: 3000, DueFraction: 0.3, PaidFraction: 0.6})
	// A dead-letter table with history (resolved and waiting letters).
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, next_retry_at)
		SELECT order_no, 'close', IF(id % 3 = 0, 'waiting', 'resolved'), NOW(3) FROM order_info WHERE id % 2 = 0`)
	require.NoError(t, err)
	for _, table := range []string{"order_info", "order_dead_letter"} {
		_, err = b.DB.ExecContext(b.Ctx, `ANALYZE TABLE `+table)
		require.NoError(t, err)
	}
	now := b.DB.Now(t)
	first := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	scan, scanArgs, err := orders.ScanPageQuery(first, -1, now, 2, 1, 500)
	require.NoError(t, err)
	plan := explain(t, b, scan, scanArgs...)
	require.Len(t, plan, 1)
	require.Equal(t, "idx_status_create_time", plan[0]["key"])
	require.Equal(t, "range", plan[0]["type"])
	require.NotContains(t, plan[0]["Extra"], "filesort")

	// The retry job's scan walks idx_table_status_retry the same way.
	plan = explainNamed(t, b, closesql.DueLetters, map[string]any{"table": "", "now": now, "after_at": first, "after_id": -1,
		"shard_total": 2, "shard_index": 1, "limit": 100})
	require.Len(t, plan, 1)
	require.Equal(t, "idx_table_status_retry", plan[0]["key"])
	require.Equal(t, "range", plan[0]["type"])
	require.NotContains(t, plan[0]["Extra"], "filesort")

	var nos []string
	require.NoError(t, b.DB.SelectContext(b.Ctx, &nos, `SELECT order_no FROM order_info ORDER BY id LIMIT 500`))
	q, args, err := sqlx.In(closesql.LetterStates, nos)
	require.NoError(t, err)
	plan = explain(t, b, q, args...)
	require.Len(t, plan, 1)
	require.Equal(t, "uk_order_stage", plan[0]["key"], "one probe per order of the page, whatever the dead-letter table holds")
}

// explainNamed is explain of a statement with named parameters.
func explainNamed(t *testing.T, b *testBundle, query string, arg any) []map[string]string {
	t.Helper()
	q, args, err := sqlexec.Named(query, arg)
	require.NoError(t, err)
	return explain(t, b, q, args...)
}

func explain(t *testing.T, b *testBundle, query string, args ...any) []map[string]string {
	t.Helper()
	rows, err := b.DB.QueryxContext(b.Ctx, "EXPLAIN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		r := map[string]any{}
		require.NoError(t, rows.MapScan(r))
		m := map[string]string{}
		for k, v := range r {
			m[k] = str(v)
		}
		t.Logf("table=%s type=%s key=%s rows=%s extra=%s", m["table"], m["type"], m["key"], m["rows"], m["Extra"])
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

func str(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// On a large table with few due orders, a run reads the due orders once and
// the unpaid not-yet-due ones, not the table: counted with the session's
// Handler_read_* status on a one-connection pool (a dry run, so the scan is
// the only work).
func TestScanReadsOnlyCandidateRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, _ := b.Seed(t, orderdemo.Spec{Orders: 20000, DueFraction: 0.01, NotDueFraction: 0.01, PaidFraction: 0.98, SKUs: 500})

	one := oneConn(t, b.DB.DSN)
	c, err := orders.NewCloser(one, b.Locker, orders.CloserConfig{})
	require.NoError(t, err)

	const pageSize = 50
	before := handlerReads(t, one)
	st, err := c.Run(b.Ctx, orders.RunOptions{DryRun: true, PageSize: pageSize})
	require.NoError(t, err)
	read := handlerReads(t, one) - before
	require.Equal(t, res.Due, st.Scanned, "each due order returned once")
	require.Equal(t, res.Due/pageSize+1, st.Pages)

	// Per due or not-due row: the index entry and its primary-key lookup;
	// with no open dead letter, none is probed per order, only one short
	// read per page; a few per page and for the status query itself.
	budget := 2*res.Due + 2*res.NotDue + 10*st.Pages + 20
	t.Logf("due %d, not due %d, pages %d: %d handler reads (budget %d, table %d rows)", res.Due, res.NotDue, st.Pages, read, budget, res.Orders)
	require.LessOrEqual(t, read, budget)
}

// oneConn is a pool of one connection to dsn, so that its session status
// counts everything a Closer over it does.
func oneConn(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	one, err := sqlx.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { one.Close() })
	one.SetMaxOpenConns(1)
	return one
}

// handlerReads is the rows one's session has read so far (its
// Handler_read_key and Handler_read_next status).
func handlerReads(t *testing.T, one *sqlx.DB) int {
	t.Helper()
	var n int
	rows, err := one.QueryContext(t.Context(), `SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_key', 'Handler_read_next')`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		var v sql.NullInt64
		require.NoError(t, rows.Scan(&name, &v))
		n += int(v.Int64)
	}
	require.NoError(t, rows.Err())
	return n
}
