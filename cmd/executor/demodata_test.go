package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// `executor demo-data -reset` against a database holding orders it did not
// make changes nothing and exits 1, saying why; -reset-database NAME must
// name the DSN's own database.
func TestDemoDataResetRefusesRealOrders(t *testing.T) {
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.ExecContext(ctx, `INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes)
		VALUES ('REAL-1', 1, 0, NOW() - INTERVAL 2 HOUR, 30), ('REAL-2', 2, 1, NOW(), 30)`)
	require.NoError(t, err)
	orderNos := func() []string {
		var nos []string
		require.NoError(t, db.SelectContext(ctx, &nos, `SELECT order_no FROM order_info ORDER BY id`))
		return nos
	}
	env := map[string]string{"MYSQL_DSN": db.DSN}

	code, _, errOut := runCLI(t, env, "demo-data", "-orders", "100", "-reset")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `refusing to reset database "`+db.Name+`": order_info holds rows`)
	require.Contains(t, errOut, "Nothing was changed")
	require.Equal(t, []string{"REAL-1", "REAL-2"}, orderNos())

	code, _, errOut = runCLI(t, env, "demo-data", "-orders", "100", "-reset", "-reset-database", "shop")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is not the database the DSN names")
	require.Equal(t, []string{"REAL-1", "REAL-2"}, orderNos())

	code, out, errOut := runCLI(t, env, "demo-data", "-orders", "100", "-reset", "-reset-database", db.Name)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "created 100 orders")
	require.NotContains(t, orderNos(), "REAL-1")

	// Now every row is demo data: a plain -reset is allowed.
	code, _, errOut = runCLI(t, env, "demo-data", "-orders", "20", "-reset")
	require.Equal(t, 0, code, errOut)
	require.Len(t, orderNos(), 20)
}

// -due 0.9 with the default -paid 0.1 leaves a not-due share of exactly
// nothing, not a floating-point -2.8e-17 that Generate would refuse.
func TestDemoDataFractionsAddingUpToOne(t *testing.T) {
	db := dbtest.New(t)
	code, out, errOut := runCLI(t, map[string]string{"MYSQL_DSN": db.DSN}, "demo-data", "-orders", "200", "-due", "0.9")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "created 200 orders")
	require.Contains(t, out, " 0 not yet due;")

	code, _, errOut = runCLI(t, map[string]string{"MYSQL_DSN": db.DSN}, "demo-data", "-orders", "200", "-due", "0.9", "-paid", "0.2")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-due + -paid must not exceed 1")
}
