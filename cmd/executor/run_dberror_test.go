package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/redistest"
)

// A database whose order_close_log is missing (migrated, then the table was
// dropped, as a rename by hand or another tool's cleanup leaves it): `executor
// run orderTimeoutCloseJob` fails with a message naming the table and what
// to do, dead-letters nothing and changes no order; `executor migrate`
// creates the table again and the next run closes every due order.
func TestRunWithoutCloseLogTable(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.ExecContext(ctx, `DROP TABLE order_close_log`)
	require.NoError(t, err)
	gen, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 700, SKUs: 40, DueFraction: 0.9, PaidFraction: 0.1, CouponFraction: 0.3})
	require.NoError(t, err)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}
	count := func(q string) int {
		var n int
		require.NoError(t, db.GetContext(ctx, &n, q))
		return n
	}

	code, out, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, "order_close_log")
	require.Contains(t, errOut, "table order_close_log is missing: run executor migrate")
	require.NotContains(t, out, "xxl-job job execute start", "refused before the job starts")
	require.Zero(t, count(`SELECT COUNT(*) FROM order_dead_letter`), "no dead letter")
	require.Equal(t, gen.Due, count(`SELECT COUNT(*) FROM order_info WHERE status = 0`), "no order changed")

	code, _, errOut = runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)
	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, out+errOut)
	require.Zero(t, count(`SELECT COUNT(*) FROM order_info WHERE status = 0`))
	require.Equal(t, gen.Due, count(`SELECT COUNT(*) FROM order_close_log`))
	require.Zero(t, count(`SELECT COUNT(*) FROM order_dead_letter`))
}
