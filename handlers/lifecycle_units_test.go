package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/xxljob"
)

// lifecycleSource seeds db, standing for order source name, with paid
// orders, a quarter of them shipped 15 days ago, a quarter paid 8 days
// ago and not shipped and the rest paid a day ago, split over 2 order tables, and returns the Jobs of
// each table.
func lifecycleSource(t *testing.T, db *sqlx.DB, name string) []*lifecycle.Jobs {
	t.Helper()
	ctx := context.Background()
	_, err := orderdemo.Generate(ctx, db, orderdemo.Spec{Orders: 200, SKUs: 20, PaidFraction: 1, OrderNoPrefix: name})
	require.NoError(t, err)
	for _, q := range []string{
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 20 DAY, status = 3, ship_time = NOW(3) - INTERVAL 15 DAY WHERE status = 1 AND id % 8 IN (0, 1)`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 8 DAY WHERE status = 1 AND id % 8 IN (2, 3)`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 1 DAY WHERE status = 1 AND id % 8 >= 4`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	tables, err := orderdemo.SplitTables(ctx, db, 2)
	require.NoError(t, err)
	return lifecycleJobs(t, db, name, tables...)
}

func lifecycleJobs(t *testing.T, db *sqlx.DB, name string, tables ...string) []*lifecycle.Jobs {
	t.Helper()
	var units []*lifecycle.Jobs
	for _, table := range tables {
		l, err := lifecycle.New(db, lifecycle.Config{Source: name, Table: table,
			Unreachable: func(err error) bool { return dbserver.ServerUnknown.Kind(err) == dbserver.KindConnection }})
		require.NoError(t, err)
		units = append(units, l)
	}
	return units
}

// The lifecycle jobs over two order databases of two tables each and a
// third that cannot be reached: every due order of the two is completed
// (or flagged) once, each unit named in the run log; the third source's
// first unit fails with the connection error and a hint, its second is
// not started, and the run fails naming them.
func TestLifecycleUnitsOverSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := []*dbtest.DB{dbtest.New(t), dbtest.New(t)}
	units := append(lifecycleSource(t, dbs[0].DB, "s0"), lifecycleSource(t, dbs[1].DB, "s1")...)
	l, err := net.Listen("tcp", "127.0.0.1:0") // a port nothing answers on once closed
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	gone, err := sqlx.Open("mysql", fmt.Sprintf("root@tcp(%s)/x?timeout=1s&parseTime=true", dead))
	require.NoError(t, err)
	defer gone.Close()
	units = append(units, lifecycleJobs(t, gone, "gone", "order_info_0", "order_info_1")...)
	due := map[string]int{}
	for i, db := range dbs {
		for _, table := range []string{"order_info_0", "order_info_1"} {
			due[fmt.Sprintf("s%d/%s", i, table)] = db.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 3")
		}
	}

	log := &runLog{}
	req := &xxljob.Request{Param: "pageSize=10", ShardTotal: 1, Log: slog.New(log)}
	err = OrderAutoConfirmUnits(units...).Handle(ctx, req)
	out := log.String()
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "units=6 failed_units=2")
	require.Contains(t, err.Error(), "2 of 6 units failed, first gone/order_info_0")
	require.Contains(t, out, "orderAutoConfirmJob executor 0/1 over 6 units days=configured pageSize=10 maxOrders=0")
	require.Regexp(t, `gone/order_info_0 FAILED after scanned=0 completed=0 .*: `, out)
	require.Contains(t, out, "gone/order_info_0 hint: ")
	require.Contains(t, out, "gone/order_info_1 FAILED: not started: source gone cannot be reached: ")
	total := 0
	for name, n := range due {
		require.Positive(t, n)
		require.Contains(t, out, fmt.Sprintf("%s page 1: scanned=10 completed=10 skipped=0", name))
		require.Contains(t, out, fmt.Sprintf("%s: scanned=%d completed=%d skipped=0 days=14", name, n, n))
		require.Contains(t, out, name+" due: at or before ")
		total += n
	}
	require.Contains(t, err.Error(), fmt.Sprintf("scanned=%d completed=%d skipped=0 days=14", total, total))
	for _, db := range dbs {
		require.Zero(t, db.Count(t, "SELECT COUNT(*) FROM order_info_0 WHERE status = 3")+
			db.Count(t, "SELECT COUNT(*) FROM order_info_1 WHERE status = 3"))
	}
}

// Two broadcast executors share the units as the close's do: each flags
// its share, and together every overdue order of every unit is flagged
// once, in its own database.
func TestLifecycleUnitsBroadcast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := []*dbtest.DB{dbtest.New(t), dbtest.New(t)}
	units := append(lifecycleSource(t, dbs[0].DB, "s0"), lifecycleSource(t, dbs[1].DB, "s1")[:1]...)
	overdue := func(db *dbtest.DB, tables ...string) int {
		n := 0
		for _, table := range tables {
			n += db.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 1 AND pay_time <= NOW() - INTERVAL 7 DAY")
		}
		return n
	}
	want := []int{overdue(dbs[0], "order_info_0", "order_info_1"), overdue(dbs[1], "order_info_0")}
	h := OrderFulfillmentTimeoutUnits(units...)
	var logs []string
	for i := range 2 {
		log := &runLog{}
		req := &xxljob.Request{ShardIndex: i, ShardTotal: 2, Log: slog.New(log)}
		require.NoError(t, h.Handle(ctx, req), log.String())
		logs = append(logs, log.String())
	}
	// 3 units over 2 executors: one whole unit each, the third by rows.
	require.Contains(t, logs[0], "s0/order_info_0: scanned=")
	require.Contains(t, logs[1], "s0/order_info_1: scanned=")
	require.Contains(t, logs[0], "s1/order_info_0 (rows of shard 0/2): scanned=")
	require.Contains(t, logs[1], "s1/order_info_0 (rows of shard 1/2): scanned=")
	for i, db := range dbs {
		require.Positive(t, want[i])
		require.Equal(t, want[i], db.Count(t, "SELECT COUNT(*) FROM order_fulfillment_overdue"), "every overdue order of %s flagged once", db.Name)
	}
}
