package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// serve and run refuse a session time zone with daylight saving (judged by
// the server's offsets in January and July) unless mysql.allowDSTZone, and
// then say so loudly. The private server runs under TZ=Europe/Berlin with
// time_zone=SYSTEM, as many production servers do.
func TestServeAndRunRefuseADSTSessionZone(t *testing.T) {
	srv := mariadbtest.Start(t, mariadbtest.Options{Env: []string{"TZ=Europe/Berlin"}})
	_, dsn := srv.NewDB(t, "shop")
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": dsn, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}
	const refusal = "the session time zone observes daylight saving (time_zone=SYSTEM (CET): UTC+01:00 in January, UTC+02:00 in July)"

	code, _, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, refusal)
	require.Contains(t, errOut, "mysql.allowDSTZone")

	port := freePort(t)
	serveEnv := map[string]string{"XXL_JOB_EXECUTOR_PORT": strconv.Itoa(port), "XXL_JOB_EXECUTOR_BINDADDR": "127.0.0.1:" + strconv.Itoa(port),
		"EXECUTOR_API_ADDR": "", "XXL_JOB_ADMIN_ADDRESSES": "http://127.0.0.1:1/xxl-job-admin", "XXL_JOB_ACCESS_TOKEN": "dbcheck-token-0123456789"}
	for k, v := range env {
		serveEnv[k] = v
	}
	start := time.Now()
	code, out, errOut := runCLI(t, serveEnv, "serve")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, refusal)
	require.NotContains(t, out, "executor serving")
	require.Less(t, time.Since(start), 30*time.Second)

	env["MYSQL_ALLOW_DST_ZONE"] = "true"
	code, out, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "THE MYSQL SESSION TIME ZONE OBSERVES DAYLIGHT SAVING")
	require.Contains(t, out, "scanned=0 closed=0")

	// A fixed offset, as the docs advise: no refusal, no warning.
	env["MYSQL_ALLOW_DST_ZONE"] = "false"
	env["MYSQL_TIME_ZONE"] = "+00:00"
	code, _, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, "DAYLIGHT SAVING")
}

// A run against a schema that lacks what the jobs use stops before any job
// runs, naming what is missing and the command that adds it.
func TestRunRefusesAnIncompleteSchema(t *testing.T) {
	db := dbtest.New(t)
	_, err := db.ExecContext(context.Background(), `RENAME TABLE order_close_log TO order_close_log_old`)
	require.NoError(t, err)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}
	code, out, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "table order_close_log is missing: run executor migrate")
	require.NotContains(t, out, "xxl-job job execute start")

	code, _, errOut = runCLI(t, env, "migrate")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 0, code, errOut)
}
