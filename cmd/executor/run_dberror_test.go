package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/sql/migrations"
)

// A database whose order_close_log was never created (every other table of
// the schema is there, with due orders): `executor run orderTimeoutCloseJob`
// fails with a message naming the table and what to do, dead-letters
// nothing and changes no order; after `executor migrate` the next run
// closes every due order. The start-up schema check stops the run before
// the job starts; a table that goes missing while serve runs is caught by
// the close's error classification instead (orders' errors tests).
func TestRunWithoutCloseLogTable(t *testing.T) {
	ctx := context.Background()
	db := dbtest.NewEmpty(t)
	ms, err := migrations.All()
	require.NoError(t, err)
	for _, m := range ms {
		if m.Name == "order_close_log" {
			continue
		}
		for _, stmt := range m.Statements {
			_, err := db.ExecContext(ctx, stmt)
			require.NoError(t, err, "%04d_%s", m.Version, m.Name)
		}
	}
	gen, err := orders.GenerateDemo(ctx, db.DB, orders.DemoSpec{Orders: 700, SKUs: 40, DueFraction: 0.9, PaidFraction: 0.1, CouponFraction: 0.3})
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
