package handlers

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/xxljob"
)

// Two order databases of three tables each and a third that cannot be
// reached; the letters are in the second database, in its second and
// third tables. One run closes each letter's order in the table the
// letter names, the unreachable source's units fail with the connection's
// error in the run log, and the run fails naming them after the others
// finished.
func TestDeadLetterRetryUnitsPerSourceAndTable(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	db0, db1 := dbtest.New(t), dbtest.New(t)
	units := append(splitUnits(t, db0.DB, "db0", 5, locker), splitUnits(t, db1.DB, "db1", 5, locker)...)
	letters := []string{
		ordertest.DeadLetter(t, db1.DB, ordertest.Unpaid(t, db1.DB, "order_info_1", false), "order_info_1"),
		ordertest.DeadLetter(t, db1.DB, ordertest.Unpaid(t, db1.DB, "order_info_2", false), "order_info_2"),
	}
	down := sqlx.MustOpen("mysql", "root@tcp(127.0.0.1:1)/down?parseTime=true&timeout=2s")
	t.Cleanup(func() { down.Close() })
	for _, table := range []string{"order_info_0", "order_info_1"} {
		sch, err := schema.Default().ForTable(table)
		require.NoError(t, err)
		c, err := orders.NewCloser(down, locker, orders.CloserConfig{SourceName: "down", Schema: sch})
		require.NoError(t, err)
		units = append(units, c)
	}

	log := &runLog{}
	req := &xxljob.Request{ShardTotal: 1, Log: slog.New(log)}
	err = DeadLetterRetryUnits(units...).Handle(context.Background(), req)
	out := log.String()
	require.Error(t, err, out)
	require.Contains(t, err.Error(), "found=2 closed=2 already_done=0 failed=0 parked=0 skipped=0")
	require.Contains(t, err.Error(), "units=8 failed_units=2")
	require.Contains(t, err.Error(), "2 of 8 units failed, first down/order_info_0")
	require.Contains(t, out, "deadLetterRetryJob over 8 units, executor 0/1 pageSize=100 maxLetters=0")
	require.Contains(t, out, "db1/order_info_1: found=1 closed=1 ")
	require.Contains(t, out, "db1/order_info_2: found=1 closed=1 ")
	require.Contains(t, out, "db0/order_info_0: found=0 closed=0 ")
	require.Regexp(t, `down/order_info_0 FAILED after found=0 .*: .*connection refused`, out)
	require.Contains(t, out, "down/order_info_0 hint: ")
	require.Contains(t, out, "down/order_info_1 FAILED: not started: source down cannot be reached: ")
	for i, table := range []string{"order_info_1", "order_info_2"} {
		require.Equal(t, 1, db1.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 2 AND order_no = '"+letters[i]+"'"))
		require.Equal(t, 1, db1.Count(t, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"), "only the letter's order")
	}
	require.Equal(t, 2, db1.Count(t, "SELECT COUNT(*) FROM order_dead_letter WHERE status = 'resolved'"))
	require.Zero(t, db0.Count(t, "SELECT COUNT(*) FROM order_close_log"))
}
