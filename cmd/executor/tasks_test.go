package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// tasksWorld is a database with a few tasks in every state and the
// environment that points the CLI at it.
func tasksWorld(t *testing.T) (*dbtest.DB, map[string]string) {
	t.Helper()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	c, err := delay.NewClient(db.DB, rdb, delay.ClientConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	ctx := context.Background()
	for _, biz := range []string{"t-pending", "t-due", "t-failed", "t-done", "t-stuck"} {
		_, _, err := c.Register(ctx, delay.Registration{BizUUID: biz, Handler: "orderTimeoutClose",
			ExecuteTime: time.Now().Add(-time.Minute), Payload: map[string]string{"orderNo": biz}})
		require.NoError(t, err)
	}
	for _, q := range []string{
		`UPDATE job_delay_task SET next_attempt_time = UTC_TIMESTAMP(3) + INTERVAL 1 HOUR WHERE biz_uuid = 't-pending'`,
		`UPDATE job_delay_task SET status = 'FAILED', retry_count = 4, last_error = 'close order t-failed: boom' WHERE biz_uuid = 't-failed'`,
		`UPDATE job_delay_task SET status = 'DONE' WHERE biz_uuid = 't-done'`,
		`UPDATE job_delay_task SET status = 'RUNNING', claim_id = 9, updated_at = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR WHERE biz_uuid = 't-stuck'`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	return db, map[string]string{
		"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "DELAY_KEY_PREFIX": prefix,
		"DELAY_RUNNING_TIMEOUT": "120s",
	}
}

func TestTasksStatsAndList(t *testing.T) {
	_, env := tasksWorld(t)

	code, out, errOut := runCLI(t, env, "tasks", "stats")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `pending\s+2`, out)
	require.Regexp(t, `failed\s+1`, out)
	require.Regexp(t, `total\s+5`, out)
	require.Regexp(t, `due now \(backlog\)\s+1 \(oldest due`, out)
	require.Regexp(t, `stuck running > 2m0s\s+1`, out)

	code, out, errOut = runCLI(t, env, "tasks", "stats", "-json")
	require.Equal(t, 0, code, errOut)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.EqualValues(t, 1, s["stuckRunning"])
	require.EqualValues(t, 1, s["dueNow"])

	code, out, errOut = runCLI(t, env, "tasks", "list", "-status", "failed")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "LAST_ERROR")
	require.Regexp(t, `t-failed\s+orderTimeoutClose\s+failed\s+\S+ \S+\s+4/3\s+close order t-failed: boom`, out)
	require.NotContains(t, out, "t-done")

	code, out, errOut = runCLI(t, env, "tasks", "list", "-json", "-limit", "2")
	require.Equal(t, 0, code, errOut)
	var tasks []delay.Task
	require.NoError(t, json.Unmarshal([]byte(out), &tasks))
	require.Len(t, tasks, 2)
	require.Equal(t, "t-stuck", tasks[0].BizUUID, "newest first")
}

func TestTasksShowRequeueCancelCheck(t *testing.T) {
	db, env := tasksWorld(t)

	code, out, errOut := runCLI(t, env, "tasks", "show", "t-failed")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `status\s+failed`, out)
	require.Regexp(t, `payload\s+\{"orderNo":"t-failed"\}`, out)
	require.Regexp(t, `traceId\s+[0-9a-f]{32}`, out)

	// check: a stuck task is a problem (exit 1); FAILED tasks are reported.
	code, out, _ = runCLI(t, env, "tasks", "check")
	require.Equal(t, 1, code)
	require.Contains(t, out, "duplicated bizUuids: 0")
	require.Contains(t, out, "stuck running: 1")
	require.Contains(t, out, "failed (see tasks list -status failed): 1")
	require.Contains(t, out, "PROBLEMS: 1 tasks RUNNING longer than 2m0s")

	code, out, errOut = runCLI(t, env, "tasks", "requeue", "t-failed", "-json")
	require.Equal(t, 0, code, errOut)
	var tk delay.Task
	require.NoError(t, json.Unmarshal([]byte(out), &tk))
	require.Equal(t, delay.StatusPending, tk.Status)
	require.Zero(t, tk.RetryCount)

	// Requeue of a task that is not FAILED: the task is shown, exit 1.
	code, out, errOut = runCLI(t, env, "tasks", "requeue", "t-done")
	require.Equal(t, 1, code)
	require.Regexp(t, `status\s+done`, out)
	require.Contains(t, errOut, "task state does not allow this")

	code, out, errOut = runCLI(t, env, "tasks", "cancel", "t-pending")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `status\s+cancelled`, out)

	code, _, errOut = runCLI(t, env, "tasks", "show", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no task with bizUuid "nope"`)

	_, err := db.Exec(`UPDATE job_delay_task SET status = 'PENDING', claim_id = 0 WHERE biz_uuid = 't-stuck'`)
	require.NoError(t, err)
	code, out, errOut = runCLI(t, env, "tasks", "check", "-json")
	require.Equal(t, 0, code, errOut)
	var rep delay.CheckReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.OK)

	// Purge walks finished tasks by due time and checks when they last
	// changed: both long past.
	_, err = db.Exec(`UPDATE job_delay_task SET updated_at = updated_at - INTERVAL 30 DAY,
		next_attempt_time = next_attempt_time - INTERVAL 30 DAY WHERE biz_uuid IN ('t-done', 't-pending')`)
	require.NoError(t, err)
	code, out, errOut = runCLI(t, env, "tasks", "purge")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "deleted 2 done/cancelled tasks older than 168h0m0s")
}

func TestTasksBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks"}, "want a subcommand"},
		{[]string{"tasks", "nuke"}, `unknown subcommand "nuke"`},
		{[]string{"tasks", "show"}, "want exactly one BIZUUID"},
		{[]string{"tasks", "show", "a", "b"}, "want exactly one BIZUUID"},
		{[]string{"tasks", "list", "-status", "LOST"}, `-status "LOST" is not pending, running, done, failed or cancelled`},
		{[]string{"tasks", "list", "-limit", "0"}, "-limit 0 is not in 1..1000"},
		{[]string{"tasks", "stats", "extra"}, `unexpected argument "extra"`},
		{[]string{"tasks", "stats", "-bogus"}, "flag provided but not defined"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}

// A redis.db the server does not have is named with the fix, as serve does,
// instead of failing on the first timer call.
func TestTasksRefusesAMissingRedisDB(t *testing.T) {
	_, env := tasksWorld(t)
	env["REDIS_DB"] = "4000"
	code, _, errOut := runCLI(t, env, "tasks", "stats")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "redis.db: 4000: the server refused to select it")
}

// -source reads the tasks of an order source's database, on that
// database's timer keys; without it, mysql.dsn's as before.
func TestTasksOfASource(t *testing.T) {
	home, env := tasksWorld(t)
	other := dbtest.New(t)
	env["ORDER_SOURCES"] = fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info_{0..1}"}]`,
		home.DSN, other.DSN)
	rdb, _ := redistest.Client(t)
	keys := delay.SourceKeyPrefix(env["DELAY_KEY_PREFIX"], "b")
	c, err := delay.NewClient(other.DB, rdb, delay.ClientConfig{KeyPrefix: keys})
	require.NoError(t, err)
	_, _, err = c.Register(context.Background(), delay.OrderTimeoutCloseIn("order_info_1", "b-7", time.Now().Add(time.Hour)))
	require.NoError(t, err)

	code, out, errOut := runCLI(t, env, "tasks", "list", "-source", "b")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "order-timeout-b-7")
	require.NotContains(t, out, "t-pending")
	code, out, errOut = runCLI(t, env, "tasks", "stats", "-source", "b")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `total\s+1\n`, out)
	require.Regexp(t, `Redis timer entries\s+1\n`, out)
	code, out, errOut = runCLI(t, env, "tasks", "show", "order-timeout-b-7", "-source", "b")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `payload\s+\{"orderNo":"b-7","table":"order_info_1"\}`, out)

	for _, src := range []string{"", "a"} { // a is on mysql.dsn's database
		code, out, errOut = runCLI(t, env, "tasks", "list", "-source", src)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "t-pending")
		require.NotContains(t, out, "b-7")
	}
	code, _, errOut = runCLI(t, env, "tasks", "list", "-source", "nope")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `-source "nope" is not an order source (the sources: a, b)`)
}
