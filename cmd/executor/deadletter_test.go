package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/deadletters"
)

// deadLetterWorld is a database with letters in every status and the
// environment that points the CLI at it.
func deadLetterWorld(t *testing.T) (*dbtest.DB, map[string]string) {
	t.Helper()
	db := dbtest.New(t)
	_, err := db.Exec(`INSERT INTO order_dead_letter
		(order_no, stage, status, status_reason, last_error, attempts, next_retry_at) VALUES
		('W-1', 'close', 'waiting', '', 'close order W-1: inventory row of sku 5 is missing', 2, NOW(3) + INTERVAL 1 HOUR),
		('P-1', 'close', 'parked', 'parked after 8 failed attempts (maximum 8); see last_error', 'close order P-1: boom', 8, NOW(3) - INTERVAL 1 DAY),
		('R-1', 'close', 'resolved', 'order is paid; nothing to close', 'old', 1, NOW(3) - INTERVAL 2 DAY)`)
	require.NoError(t, err)
	_, prefix := redistest.Client(t)
	return db, map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix}
}

func TestDeadLetterCLI(t *testing.T) {
	db, env := deadLetterWorld(t)

	code, out, errOut := runCLI(t, env, "deadletter", "list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "REASON / LAST_ERROR")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^\d+\s+R-1\s+-\s+close\s+resolved\s+1\s+\S+ \S+\s+\S+ \S+\s+order is paid; nothing to close$`, lines[1], "newest first")
	require.Regexp(t, `P-1\s+-\s+close\s+parked\s+8\s+.*parked after 8 failed attempts`, lines[2])
	require.Regexp(t, `W-1\s+-\s+close\s+waiting\s+2\s+.*inventory row of sku 5 is missing`, lines[3])

	code, out, errOut = runCLI(t, env, "deadletter", "list", "-status", "PARKED", "-json")
	require.Equal(t, 0, code, errOut)
	var list deadletters.Listing
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.DeadLetters, 1)
	require.Equal(t, "P-1", list.DeadLetters[0].OrderNo)
	require.Zero(t, list.NextBefore)

	code, out, errOut = runCLI(t, env, "deadletter", "list", "-limit", "1")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `\(more: -before \d+\)`, out)

	code, out, errOut = runCLI(t, env, "deadletter", "show", "P-1")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `status\s+parked`, out)
	require.Regexp(t, `attempts\s+8`, out)
	require.Regexp(t, `lastError\s+close order P-1: boom`, out)

	code, out, errOut = runCLI(t, env, "deadletter", "requeue", "P-1", "-json")
	require.Equal(t, 0, code, errOut)
	var dl deadletters.Letter
	require.NoError(t, json.Unmarshal([]byte(out), &dl))
	require.Equal(t, deadletters.Waiting, dl.Status)
	require.Equal(t, 8, dl.Attempts)
	var due int
	require.NoError(t, db.Get(&due, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = 'P-1' AND status = 'waiting' AND next_retry_at <= NOW(3)`))
	require.Equal(t, 1, due)

	// A resolved letter is shown and refused (exit 1); unknown ones say so.
	code, out, errOut = runCLI(t, env, "deadletter", "requeue", "R-1")
	require.Equal(t, 1, code)
	require.Regexp(t, `status\s+resolved`, out)
	require.Contains(t, errOut, "dead letter is resolved; nothing to requeue")
	code, _, errOut = runCLI(t, env, "deadletter", "show", "NOPE")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no close dead letter for order "NOPE"`)
	code, _, errOut = runCLI(t, env, "deadletter", "show", "W-1", "-stage", "payment")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no payment dead letter for order "W-1"`)
}

// `deadletter requeue -status ...` moves every matching letter and says how
// many; -dry-run only counts.
func TestDeadLetterCLIBulkRequeue(t *testing.T) {
	db, env := deadLetterWorld(t)
	code, out, errOut := runCLI(t, env, "deadletter", "requeue", "-status", "parked", "-error-like", "boom", "-dry-run")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "dry run: 1 letter(s) match; none moved\n", out)
	code, out, errOut = runCLI(t, env, "deadletter", "requeue", "-status", "parked", "-since", "2h", "-json")
	require.Equal(t, 0, code, errOut)
	var res deadletters.RequeueResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 1, res.Matched)
	require.Equal(t, 1, res.Requeued)
	var parked int
	require.NoError(t, db.Get(&parked, `SELECT COUNT(*) FROM order_dead_letter WHERE status = 'parked'`))
	require.Zero(t, parked)
	code, out, errOut = runCLI(t, env, "deadletter", "requeue", "-status", "parked")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "requeued 0 of 0 matching letter(s)\n", out)
}

func TestDeadLetterCLIBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deadletter"}, "want a subcommand: list, show, requeue"},
		{[]string{"deadletter", "purge"}, `unknown subcommand "purge"`},
		{[]string{"deadletter", "show"}, "want exactly one ORDERNO"},
		{[]string{"deadletter", "requeue", "a", "b"}, "want exactly one ORDERNO"},
		{[]string{"deadletter", "list", "-status", "lost"}, `-status "lost" is not waiting, parked or resolved`},
		{[]string{"deadletter", "list", "-limit", "0"}, "-limit 0 is not in 1..1000"},
		{[]string{"deadletter", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"deadletter", "list", "-bogus"}, "flag provided but not defined"},
		{[]string{"deadletter", "requeue", "-status", "resolved"}, "a bulk requeue needs status parked or waiting"},
		{[]string{"deadletter", "requeue", "-status", "parked", "-since", "soon"}, `-since "soon" is neither a time`},
		{[]string{"deadletter", "requeue", "-status", "parked", "P-1"}, "ORDERNO and -status do not go together: write `executor deadletter requeue P-1` " +
			"for that order's letter, or `executor deadletter requeue -status parked` for every matching letter"},
		{[]string{"deadletter", "requeue", "P-1", "-status", "waiting", "-dry-run"}, "or `executor deadletter requeue -status waiting -dry-run` for"},
		{[]string{"deadletter", "requeue"}, "want an ORDERNO, or -status parked|waiting"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}

// The routes serve mounts on the API port sit behind its token.
func TestDeadLetterAPIMounted(t *testing.T) {
	db, _ := deadLetterWorld(t)
	srv := api.New(api.Config{Addr: "127.0.0.1:0", Token: "s3cret"})
	srv.MountDeadLetters(api.HomeOnly(deadletters.New(db.DB)))
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	get := func(method, path, token string) (int, string) {
		req, err := http.NewRequestWithContext(context.Background(), method, ts.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("X-Executor-Token", token)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, _ := get("GET", "/api/dead-letters", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get("POST", "/api/dead-letters/P-1/requeue", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := get("GET", "/api/dead-letters?status=parked", "s3cret")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"orderNo":"P-1"`)
	code, body = get("POST", "/api/dead-letters/P-1/requeue", "s3cret")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"status":"waiting"`)
}

// `executor run` wires the jobs from the configuration: the lifecycle days
// from order.timeout, the dead-letter maximum from order.deadLetter.
func TestRunLifecycleAndRetryJobs(t *testing.T) {
	db, env := deadLetterWorld(t)
	env["XXL_JOB_EXECUTOR_LOGPATH"] = t.TempDir()
	env["ORDER_TIMEOUT_AUTO_CONFIRM_DAYS"] = "10"
	env["ORDER_TIMEOUT_FULFILLMENT_TIMEOUT_DAYS"] = "3"
	env["ORDER_DEAD_LETTER_MAX_ATTEMPTS"] = "2"
	_, err := db.Exec(`INSERT INTO order_info (order_no, user_id, status, create_time, pay_time, ship_time) VALUES
		('S-11', 1, 3, NOW() - INTERVAL 12 DAY, NOW(3) - INTERVAL 12 DAY, NOW(3) - INTERVAL 11 DAY),
		('S-9',  1, 3, NOW() - INTERVAL 12 DAY, NOW(3) - INTERVAL 12 DAY, NOW(3) - INTERVAL 9 DAY),
		('P-4',  1, 1, NOW() - INTERVAL 4 DAY,  NOW(3) - INTERVAL 4 DAY,  NULL),
		('P-2',  1, 1, NOW() - INTERVAL 2 DAY,  NOW(3) - INTERVAL 2 DAY,  NULL),
		('U-1',  1, 0, NOW() - INTERVAL 2 HOUR, NULL, NULL)`)
	require.NoError(t, err)
	// U-1 is due and its close fails (its coupon does not exist).
	_, err = db.Exec(`UPDATE order_info SET coupon_id = 999 WHERE order_no = 'U-1'`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at)
		VALUES ('U-1', 'close', 'waiting', 'first failure', 1, NOW(3) - INTERVAL 1 MINUTE)`)
	require.NoError(t, err)

	code, out, errOut := runCLI(t, env, "run", "orderAutoConfirmJob")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "scanned=1 completed=1 skipped=0 days=10")
	code, out, errOut = runCLI(t, env, "run", "orderFulfillmentTimeoutJob", "-param", "pageSize=1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "scanned=1 flagged=1 skipped=0 days=3")
	var status []string
	require.NoError(t, db.Select(&status, `SELECT CONCAT(order_no, '=', status) FROM order_info ORDER BY order_no`))
	require.Equal(t, []string{"P-2=1", "P-4=1", "S-11=4", "S-9=3", "U-1=0"}, status)

	// Attempt 2 of 2 fails: parked, and the run fails for the alarm.
	code, out, _ = runCLI(t, env, "run", "deadLetterRetryJob")
	require.Equal(t, 1, code)
	require.Contains(t, out, "found=1 closed=0 already_done=0 failed=0 parked=1")
	code, out, errOut = runCLI(t, env, "deadletter", "show", "U-1")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `status\s+parked`, out)
	require.Regexp(t, `statusReason\s+parked after 2 failed attempts \(maximum 2\)`, out)
	require.Contains(t, out, "coupon 999 is missing")
}
