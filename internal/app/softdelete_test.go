package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/xxljob"
)

// softDeleteOrder is an overdue order of one shard table of
// TestSoftDeleteReachesEverySource: its number, and whether the shop
// soft-deleted it.
type softDeleteOrder struct {
	sn      string
	deleted bool
}

// shardSoftDeleteShop gives db ordertest's foreign shop with an
// is_deleted column (0: live), its orders split into the order tables
// t_order_N of tables (each beside its item table t_order_item_N, no
// t_order): in each, one live and two deleted unpaid orders an hour past
// their deadline, each holding its own SKU's reservation, coupon and
// member's points, so what comes back is told apart per order. base
// numbers the orders' SKUs, coupons and members, unique across databases.
func shardSoftDeleteShop(t *testing.T, db *dbtest.DB, tables []int, base int64) map[string][]softDeleteOrder {
	t.Helper()
	ordertest.ForeignTables(t, db.DB)
	createTables(t, db, "ALTER TABLE t_order ADD COLUMN is_deleted TINYINT NOT NULL DEFAULT 0")
	out := map[string][]softDeleteOrder{}
	k := base
	for _, n := range tables {
		table := fmt.Sprintf("t_order_%d", n)
		for _, o := range []softDeleteOrder{{fmt.Sprintf("T%d-L", n), false}, {fmt.Sprintf("T%d-D1", n), true}, {fmt.Sprintf("T%d-D2", n), true}} {
			k++
			ordertest.ForeignOrder(t, db.DB, ordertest.ForeignOpts{OrderSn: o.sn, MemberID: k, Age: time.Hour, Coupon: k, Points: 10,
				Items: []ordertest.Item{{SKU: k, Qty: 2}}})
			if o.deleted {
				createTables(t, db, fmt.Sprintf("UPDATE t_order SET is_deleted = 1 WHERE order_sn = '%s'", o.sn))
			}
			out[table] = append(out[table], o)
		}
		createTables(t, db, fmt.Sprintf("CREATE TABLE %s LIKE t_order", table),
			fmt.Sprintf("CREATE TABLE t_order_item_%d LIKE t_order_item", n),
			fmt.Sprintf("INSERT INTO %s SELECT * FROM t_order WHERE order_sn LIKE 'T%d-%%'", table, n),
			fmt.Sprintf("INSERT INTO t_order_item_%d SELECT i.* FROM t_order_item i JOIN %s o ON o.id = i.order_id", n, table))
	}
	createTables(t, db, "DROP TABLE t_order, t_order_item")
	return out
}

// order.schema.softDelete over order.sources: every source's order tables
// get a copy of the declared schema, soft delete included. Two databases,
// two shard tables each (numbered across them, as sharded-orders.md lays
// them out), each table with a live and two deleted overdue orders: the
// overdue gauge and the console count the live ones of each unit (whose
// order view shows a deleted one as deleted), one run
// of orderTimeoutCloseJob closes exactly those in every table and gives
// back nothing a deleted order holds, and deadLetterRetryJob resolves the
// letter of a deleted order in each source's database without a close.
func TestSoftDeleteReachesEverySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := []*dbtest.DB{dbtest.New(t), dbtest.New(t)}
	shops := []map[string][]softDeleteOrder{shardSoftDeleteShop(t, dbs[0], []int{0, 1}, 0),
		shardSoftDeleteShop(t, dbs[1], []int{2, 3}, 100)}
	for i, db := range dbs {
		table := fmt.Sprintf("t_order_%d", 2*i+1)
		ordertest.DeadLetter(t, db.DB, fmt.Sprintf("T%d-D1", 2*i+1), table)
	}
	const token = "alice-token-0123456789"
	cfg, err := config.LoadWith([]byte(ordertest.ForeignYAML), sourcesEnv(t, dbs[0].DSN, map[string]string{
		"EXECUTOR_API_CONSOLE_TOKENS": "alice:" + token, "ORDER_SCHEMA_SOFT_DELETE_COLUMN": "is_deleted",
		"ORDER_SCHEMA_SOFT_DELETE_LIVE_VALUE": "0",
	}, fmt.Sprintf(`[{name: s0, dsn: %q, tables: "t_order_{0..1}"}, {name: s1, dsn: %q, tables: "t_order_{2..3}"}]`, dbs[0].DSN, dbs[1].DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()

	s := serveMetrics(t, d)()
	get := consoleOf(t, cfg, d, token)
	for i, src := range []string{"s0", "s1"} {
		for table := range shops[i] {
			require.Equal(t, 1.0, seriesValue(t, s, metrics.OrdersOverdueUnpaid, "source", src, "table", table),
				"%s/%s: the live order only", src, table)
		}
		code, body := get("/console/?source=" + src)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `<dt>due now, not held back by a dead letter</dt><dd class="warn"><a href="/console/runs?source=`+src+`">2</a>`,
			"%s: the live order of each of its tables", src)
		sn := fmt.Sprintf("T%d-D2", 2*i+1)
		code, body = get("/console/orders/" + sn + "?source=" + src)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, fmt.Sprintf("Found in the order table t_order_%d of order source %s.", 2*i+1, src))
		require.Contains(t, body, "<dt>Soft delete</dt><dd>deleted (is_deleted = 1): the close never closes it</dd>", sn)
	}

	exec := jobsOf(t, d, "softdelete-sources-test")
	res, err := exec.RunOnce(ctx, handlers.OrderTimeoutCloseJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Contains(t, res.Msg, "scanned=4 closed=4 skipped_paid=0 skipped_locked=0 dead_lettered=0")
	require.Contains(t, res.Msg, "units=4")
	res, err = exec.RunOnce(ctx, handlers.DeadLetterRetryJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Contains(t, res.Msg, "found=2 closed=0 already_done=2")

	for i, db := range dbs {
		for table, placed := range shops[i] {
			for _, o := range placed {
				status, locked, used, points := 4, 0, 0, 1000 // closed, and all given back
				if o.deleted {
					status, locked, used, points = 0, 2, 1, 990 // as the shop left it
				}
				var got struct {
					Status int `db:"order_status"`
					Locked int `db:"locked"`
					Used   int `db:"use_status"`
					Points int `db:"points"`
				}
				require.NoError(t, db.GetContext(ctx, &got, fmt.Sprintf(`SELECT o.order_status, s.locked, c.use_status, m.points
					FROM %s o JOIN t_sku_stock s ON s.sku = o.member_id JOIN t_coupon_history c ON c.coupon_id = o.coupon_id
					JOIN t_member m ON m.id = o.member_id WHERE o.order_sn = ?`, table), o.sn))
				require.Equal(t, [4]int{status, locked, used, points}, [4]int{got.Status, got.Locked, got.Used, got.Points},
					"%s in %s of source s%d: status, reservation, coupon use, points", o.sn, table, i)
			}
		}
		require.Equal(t, 2, db.Count(t, `SELECT COUNT(*) FROM order_close_log`), "source s%d: one log row per live order", i)
		var reason string
		require.NoError(t, db.GetContext(ctx, &reason, `SELECT status_reason FROM order_dead_letter WHERE status = 'resolved'`))
		require.Equal(t, "order is no longer unpaid (closed before, further on, or soft-deleted); nothing to close", reason, "source s%d", i)
	}

	// The start-up check looks for the column in every table of every
	// source, not only in the first one it checks the shop's names in.
	createTables(t, dbs[1], "ALTER TABLE t_order_3 DROP COLUMN is_deleted")
	_, err = Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.ErrorContains(t, err, "order source s1: the order tables listed in order.sources are not what the executor needs")
	require.ErrorContains(t, err, "column t_order_3.is_deleted is missing")
}
