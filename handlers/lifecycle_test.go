package handlers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/xxljob"
)

func TestLifecycleOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		param, key string
		want       lifecycle.Options
		wantErr    string
	}{
		{param: "", key: paramAutoConfirmDays},
		{param: "autoConfirmDays=10,pageSize=50,maxOrders=7,dryRun=true", key: paramAutoConfirmDays,
			want: lifecycle.Options{Days: 10, PageSize: 50, MaxOrders: 7, DryRun: true}},
		{param: `{"fulfillmentTimeoutDays": 5}`, key: paramFulfillmentTimeoutDays, want: lifecycle.Options{Days: 5}},
		{param: "autoConfirmDays=0", key: paramAutoConfirmDays, wantErr: `autoConfirmDays="0": want a whole number from 1 to 3650`},
		{param: "autoConfirmDays=3651", key: paramAutoConfirmDays, wantErr: "from 1 to 3650"},
		{param: "autoConfirmDays=5", key: paramFulfillmentTimeoutDays,
			wantErr: "unknown job param key(s) autoConfirmDays; allowed: fulfillmentTimeoutDays, pageSize, maxOrders, dryRun"},
		{param: "fulfillmentTimeoutDays=1 OR 1=1", key: paramFulfillmentTimeoutDays, wantErr: "want a whole number"},
		{param: "pageSize=0", key: paramAutoConfirmDays, wantErr: `pageSize="0"`},
		{param: "dryRun=yes", key: paramAutoConfirmDays, wantErr: "want true or false"},
	} {
		o, err := lifecycleOptions(tc.param, tc.key)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.param)
			continue
		}
		require.NoError(t, err, tc.param)
		require.Equal(t, tc.want, o, tc.param)
	}
}

func TestRetryOptions(t *testing.T) {
	t.Parallel()
	o, err := retryOptions("pageSize=20,maxLetters=3,dryRun=1")
	require.NoError(t, err)
	require.Equal(t, orders.RetryOptions{PageSize: 20, MaxLetters: 3, DryRun: true}, o)
	for param, want := range map[string]string{
		"maxOrders=3":   "unknown job param key(s) maxOrders; allowed: pageSize, maxLetters, dryRun",
		"maxLetters=-1": `maxLetters="-1": want a whole number from 0`,
		"pageSize=5001": "from 1 to 5000",
	} {
		_, err := retryOptions(param)
		require.ErrorContains(t, err, want, param)
	}
}

// lifecycleExec is an executor with the real handlers over a fresh database
// holding shipped and paid orders at known ages.
func lifecycleExec(t *testing.T) (*dbtest.DB, *xxljob.Executor) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 300, SKUs: 20, PaidFraction: 0.9, DueFraction: 0.05, NotDueFraction: 0.05})
	require.NoError(t, err)
	for _, q := range []string{
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 20 DAY, status = 3, ship_time = NOW(3) - INTERVAL 15 DAY WHERE status = 1 AND id % 4 = 0`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 20 DAY, status = 3, ship_time = NOW(3) - INTERVAL 11 DAY WHERE status = 1 AND id % 4 = 1`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 8 DAY WHERE status = 1 AND id % 4 = 2`,
		`UPDATE order_info SET pay_time = NOW(3) - INTERVAL 6 DAY WHERE status = 1 AND id % 4 = 3`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)
	lc, err := lifecycle.New(db.DB, lifecycle.Config{AutoConfirmDays: 14, FulfillmentTimeoutDays: 7})
	require.NoError(t, err)
	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: "lifecycle-test", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, Register(exec, &Deps{Closer: closer, Lifecycle: lc}))
	return db, exec
}

func countRows(t *testing.T, db *dbtest.DB, q string) int {
	t.Helper()
	var n int
	require.NoError(t, db.GetContext(context.Background(), &n, q))
	return n
}

// Both lifecycle jobs through the executor's run path: sharded, rerun, the
// days override, dry run, and a bad param that fails the run before
// anything changes.
func TestLifecycleJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, exec := lifecycleExec(t)
	base, err := ordertest.Snapshot(ctx, db)
	require.NoError(t, err)
	shipped15 := countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 3 AND id % 4 = 0`)
	shipped11 := countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 3 AND id % 4 = 1`)
	paid8 := countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 1 AND id % 4 = 2`)
	paid6 := countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 1 AND id % 4 = 3`)
	require.Positive(t, shipped15*shipped11*paid8*paid6)

	run := func(handler, param string, idx, total int) xxljob.Result {
		t.Helper()
		res, err := exec.RunOnce(ctx, handler, param, idx, total, nil)
		require.NoError(t, err)
		t.Logf("%s %q %d/%d: %s", handler, param, idx, total, res.Msg)
		return res
	}

	res := run(OrderAutoConfirmJob, "dryRun=true", 0, 1)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Regexp(t, `^scanned=\d+ completed=\d+ skipped=0 days=14 seconds=`, res.Msg)
	require.Zero(t, countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 4`))

	perShard := func(query string) []int {
		var ids []int64
		require.NoError(t, db.SelectContext(ctx, &ids, query))
		return shard.Counts(ids, 3)
	}
	for i := range 3 {
		res := run(OrderAutoConfirmJob, "pageSize=7", i, 3)
		require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
		share := perShard(`SELECT id FROM order_info WHERE id % 4 = 0 AND status IN (3, 4)`)[i]
		require.Positive(t, share)
		require.Equal(t, share, perShard(`SELECT id FROM order_info WHERE status = 4`)[i], "shard %d completed its share", i)
		require.Contains(t, res.Msg, fmt.Sprintf("completed=%d ", share))
	}
	require.Equal(t, shipped15, countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 4`))
	res = run(OrderAutoConfirmJob, "", 0, 1)
	require.Contains(t, res.Msg, "scanned=0 completed=0")
	res = run(OrderAutoConfirmJob, "autoConfirmDays=10", 0, 1)
	require.Contains(t, res.Msg, fmt.Sprintf("completed=%d skipped=0 days=10", shipped11))

	res = run(OrderFulfillmentTimeoutJob, "", 0, 1)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Contains(t, res.Msg, fmt.Sprintf("scanned=%d flagged=%d skipped=0 days=7", paid8, paid8))
	res = run(OrderFulfillmentTimeoutJob, "", 0, 1)
	require.Contains(t, res.Msg, "scanned=0 flagged=0")
	res = run(OrderFulfillmentTimeoutJob, "fulfillmentTimeoutDays=5,maxOrders=1", 0, 1)
	require.Contains(t, res.Msg, "flagged=1 ")
	require.Equal(t, paid8+1, countRows(t, db, `SELECT COUNT(*) FROM order_fulfillment_overdue`))
	require.Equal(t, paid8+paid6, countRows(t, db, `SELECT COUNT(*) FROM order_info WHERE status = 1 AND pay_time IS NOT NULL`), "flagging changes no order")

	for handler, param := range map[string]string{
		OrderAutoConfirmJob:        "autoConfirmDays=0",
		OrderFulfillmentTimeoutJob: "autoConfirmDays=3",
		DeadLetterRetryJob:         "maxLetters=x",
	} {
		res := run(handler, param, 0, 1)
		require.Equal(t, xxljob.CodeFail, res.Code, handler)
		require.Contains(t, res.Msg, "job param", handler)
	}
	require.NoError(t, ordertest.Check(ctx, db, base))
}

// Handlers registered without their domain object fail the run with a
// message instead of panicking.
func TestLifecycleHandlersNotConfigured(t *testing.T) {
	t.Parallel()
	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: "lifecycle-unset", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, Register(exec, &Deps{}))
	for _, h := range []string{OrderAutoConfirmJob, OrderFulfillmentTimeoutJob, DeadLetterRetryJob} {
		res, err := exec.RunOnce(context.Background(), h, "", 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, xxljob.CodeFail, res.Code)
		require.Contains(t, res.Msg, "started without what the handler needs")
	}
}

// Lifecycle jobs left out on purpose (a declared order.schema) fail every
// run with the reason they were left out.
func TestLifecycleHandlersLeftOut(t *testing.T) {
	t.Parallel()
	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: "lifecycle-off", LogPath: t.TempDir()})
	require.NoError(t, err)
	why := errors.New("not on a declared order.schema")
	require.NoError(t, Register(exec, &Deps{NoLifecycle: why}))
	for _, h := range []string{OrderAutoConfirmJob, OrderFulfillmentTimeoutJob} {
		res, err := exec.RunOnce(context.Background(), h, "", 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, xxljob.CodeFail, res.Code)
		require.Contains(t, res.Msg, h+": not on a declared order.schema")
	}
}

// The retry job through the run path: letters due are replayed, the run
// succeeds; a run that parks letters fails so the alarm fires.
func TestDeadLetterRetryJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	_, err := orderdemo.Generate(ctx, db.DB, orderdemo.Spec{Orders: 100, SKUs: 10, DueFraction: 0.5, PaidFraction: 0.5})
	require.NoError(t, err)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(db.DB, locker, orders.CloserConfig{
		DeadLetterBackoff: orders.DeadLetterBackoff{Base: time.Minute, ParkAfter: 3}})
	require.NoError(t, err)
	exec, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName: "retry-test", LogPath: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, Register(exec, &Deps{Closer: closer}))
	var due, paid string
	require.NoError(t, db.GetContext(ctx, &due, `SELECT order_no FROM order_info WHERE status = 0 ORDER BY id LIMIT 1`))
	require.NoError(t, db.GetContext(ctx, &paid, `SELECT order_no FROM order_info WHERE status = 1 ORDER BY id LIMIT 1`))
	_, err = db.ExecContext(ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at) VALUES
		(?, 'close', 'waiting', 'old', 1, NOW(3) - INTERVAL 1 MINUTE), (?, 'close', 'waiting', 'old', 1, NOW(3) - INTERVAL 1 MINUTE),
		('NOT-DUE', 'close', 'waiting', 'old', 1, NOW(3) + INTERVAL 1 HOUR)`, due, paid)
	require.NoError(t, err)

	res, err := exec.RunOnce(ctx, DeadLetterRetryJob, "dryRun=true", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Contains(t, res.Msg, "found=2 closed=0")

	res, err = exec.RunOnce(ctx, DeadLetterRetryJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code, res.Msg)
	require.Regexp(t, `^found=2 closed=1 already_done=1 failed=0 parked=0 skipped=0 seconds=`, res.Msg)
	res, err = exec.RunOnce(ctx, DeadLetterRetryJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Contains(t, res.Msg, "found=0 ")

	_, err = db.ExecContext(ctx, `INSERT INTO order_dead_letter (order_no, stage, status, attempts, next_retry_at)
		VALUES ('GONE', 'close', 'waiting', 1, NOW(3) - INTERVAL 1 MINUTE)`)
	require.NoError(t, err)
	res, err = exec.RunOnce(ctx, DeadLetterRetryJob, "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeFail, res.Code)
	require.Contains(t, res.Msg, "parked=1")
	require.Contains(t, res.Msg, "1 dead letter(s) parked for a person")
	require.Equal(t, 1, countRows(t, db, `SELECT COUNT(*) FROM order_dead_letter WHERE order_no = 'NOT-DUE' AND status = 'waiting' AND attempts = 1`))
}
