package delay

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/plantest"
)

// TestHotStatementPlans runs the dispatcher's and the sweep's statements
// through plantest.Check: with the statistics as the load left them and
// with statistics that lie, each keeps its plan and reads at most about 3
// rows or index entries per task it handles. A statement added to or
// changed on these paths gets one entry here.
func TestHotStatementPlans(t *testing.T) {
	t.Parallel()
	f := newPlanFixture(t)
	in := func(q string, args ...any) plantest.Query { return plantest.In(t, q, args...) }
	named := func(q string, arg any) plantest.Query { return plantest.Named(t, q, arg) }
	q := plantest.Q
	uses := plantest.Uses
	pk := uses("job_delay_task", "PRIMARY", "range", "const")
	// Recovery, purge, the lists and counts by status: the one status-led
	// index (the RUNNING entries are the claims in flight).
	nextAttempt := func(types ...string) plantest.Plan {
		return uses("job_delay_task", "idx_status_next_attempt", types...)
	}
	n := len(f.due)
	now := dbTime(f.now)
	one := f.due[0]
	hour := time.Hour.Microseconds()
	epoch := "1000-01-01 00:00:00.000"
	markSQL, markArgs := markPublishedQuery(f.dueEntries)
	markQ := q(markSQL, markArgs...)
	// One confirm at a time is the RabbitMQ timer's common case.
	markOneSQL, markOneArgs := markPublishedQuery(f.dueEntries[:1])

	plantest.Check(t, f.db.DB, []string{"job_delay_task"}, []plantest.Statement{
		// The dispatcher: claim popped ids, read the claim back, finish.
		{Name: "claim", Query: named(claimTasks, claimParams{ClaimID: 7, IDs: f.due}), Units: n, Plan: pk},
		{Name: "claim batch handlers", Query: named(claimTasksOf, claimParams{ClaimID: 7, IDs: f.due, Handlers: []string{"orderTimeoutClose"}}), Units: n, Plan: pk},
		{Name: "claim singles", Query: named(claimTasksNotOf, claimParams{ClaimID: 7, IDs: f.due, Handlers: []string{"x"}, Limit: 50}), Units: n, Plan: pk},
		{Name: "read claimed", Query: named(selectClaimed, claimParams{ClaimID: 9, IDs: f.running}), Units: len(f.running), Plan: pk},
		{Name: "pending times", Query: in(selectPendingTimes, f.due), Units: n, Plan: pk},
		{Name: "done", Query: named(finishDone, finishParams{ID: one, ClaimID: 7}), Units: 1, Plan: pk},
		{Name: "retry", Query: named(finishRetry, finishParams{ID: one, ClaimID: 7, Next: now, LastError: "boom"}), Units: 1, Plan: pk},
		{Name: "retry now (recovery)", Query: named(finishRetry, finishParams{ID: one, ClaimID: 7, LastError: "stuck"}), Units: 1, Plan: pk},
		{Name: "failed", Query: named(finishFailed, finishParams{ID: one, ClaimID: 7, LastError: "boom"}), Units: 1, Plan: pk},
		{Name: "release", Query: named(rescheduleClaim, finishParams{ID: one, ClaimID: 7, Execute: now, LastError: "shutdown"}), Units: 1, Plan: pk},
		{Name: "not now / not due", Query: named(rescheduleClaim, finishParams{ID: one, ClaimID: 7, Next: now, Execute: now, LastError: "not now"}), Units: 1, Plan: pk},
		{Name: "give a claim back", Query: named(unclaimTasks, claimParams{ClaimID: 9, IDs: f.running}), Units: len(f.running), Plan: pk},
		{Name: "lock claimed", Query: named(lockClaimedRunning, claimParams{ClaimID: 9, IDs: f.running}), Units: len(f.running), Plan: pk},
		{Name: "done many", Query: named(finishDoneMany, claimParams{ClaimID: 9, IDs: f.running}), Units: len(f.running), Plan: pk},
		// Registration and the operator's single-task statements.
		{Name: "by bizUuid", Query: q(selectByBizUUID, f.biz), Units: 1, Plan: uses("job_delay_task", "uk_biz_uuid", "const")},
		{Name: "cancel", Query: q(cancelTask, f.biz), Units: 1, Plan: uses("job_delay_task", "uk_biz_uuid", "range")},
		{Name: "requeue", Query: q(requeueTask, f.biz), Units: 1, Plan: uses("job_delay_task", "uk_biz_uuid", "range")},
		// The operators' views (the console): list windows, exact
		// lookups, page rows, bounded counts.
		{Name: "list: newest page", Query: named(taskWindowByID, windowParams{BeforeID: math.MaxInt64, Window: 51}), Units: 51, Plan: pk},
		{Name: "list: handler window", Query: named(taskWindowByID, windowParams{Handler: "x", BeforeID: math.MaxInt64, Window: SearchWindow}), Units: SearchWindow, Plan: pk},
		{Name: "list: status window", Query: named(taskWindowByStatus, windowParams{Handler: "x", Status: "DONE", BeforeAt: "9999-12-31 00:00:00.000", BeforeID: math.MaxInt64, Window: SearchWindow}), Units: SearchWindow, Plan: nextAttempt("range")},
		{Name: "list: page rows", Query: in(selectTasksByID, f.due[:50]), Units: 50, Plan: pk},
		{Name: "by trace id", Query: q(selectByTraceID, f.trace), Units: 1, Plan: uses("job_delay_task", "uk_trace_id", "const")},
		{Name: "count: a status", Query: named(countStatusCapped, map[string]any{"status": "DONE", "cap": countCap}), Units: countCap, Plan: nextAttempt("ref", "range").And("<derived2>", "", "ALL")},
		{Name: "count: due", Query: named(countDueCapped, map[string]any{"now": now, "cap": countCap}), Units: f.dueCount, Plan: uses("job_delay_task", "idx_status_next_attempt", "range").And("<derived2>", "", "ALL")},
		{Name: "count: stuck", Query: named(countStuckCapped, map[string]any{"before": dbTime(f.now.Add(-time.Hour)), "cap": countCap}), Units: f.stuck, Plan: nextAttempt("ref", "range").And("<derived2>", "", "ALL")},
		// The sweep, recovery, the reconciler and the purge.
		{Name: "sweep: due", Query: named(selectDue, shardParams{ShardTotal: 1, Limit: 100}), Units: 100, Plan: uses("job_delay_task", "idx_status_next_attempt", "range")},
		{Name: "recovery: stuck", Query: named(selectStuck, shardParams{AgeUS: hour, ShardTotal: 1, Limit: 100}), Units: f.stuck, Plan: nextAttempt("ref", "range")},
		{Name: "reconciler: timer page", Query: named(selectTimerPage, pageParams{Before: dbTime(f.now.Add(time.Hour)), AfterAt: epoch, Limit: 500}), Units: 500, Plan: uses("job_delay_task", "idx_status_next_attempt", "range")},
		{Name: "purge", Query: named(purgeTasks, map[string]any{"retention_us": hour, "limit": 1000}), Units: 1000, Plan: nextAttempt("range")},
		// The RabbitMQ timer: published_at after confirms, and its
		// reconciler's two pages (never confirmed; overdue and published
		// long ago).
		{Name: "rabbitmq: mark published", Query: markQ, Units: n, Plan: pk},
		{Name: "rabbitmq: mark one published", Query: q(markOneSQL, markOneArgs...), Units: 1, Plan: pk},
		{Name: "rabbitmq reconciler: unpublished", Query: named(selectUnpublished, pageParams{Before: now, AfterAt: epoch, Limit: 500}), Units: 500,
			Plan: uses("job_delay_task", "idx_published_next", "range", "ref")},
		{Name: "rabbitmq reconciler: its lock (no table)", Query: q(getReconcileLock, "delay."), Units: 1},
		{Name: "rabbitmq reconciler: its lock released", Query: q(releaseReconcileLock, "delay."), Units: 1},
		{Name: "rabbitmq reconciler: overdue", Query: named(selectOverdue, pageParams{Before: now, PublishedBefore: now, AfterAt: epoch, Limit: 500}), Units: 500,
			Plan: uses("job_delay_task", "idx_status_next_attempt", "range")},
	})
}

// planFixture is a task table after a while: finished tasks pile up, a few
// are pending (due and later), running (some stuck), failed or cancelled.
type planFixture struct {
	db       *dbtest.DB
	now      time.Time
	due      []int64 // PENDING and due
	running  []int64 // RUNNING under claim 9
	stuck    int     // RUNNING for over an hour
	biz      string  // a FAILED task's bizUuid
	trace    string  // its trace id
	dueCount int     // PENDING and due
	// dueEntries are the due tasks with their next attempt times.
	dueEntries []timerEntry
}

func newPlanFixture(t *testing.T) *planFixture {
	t.Helper()
	ctx := context.Background()
	f := &planFixture{db: dbtest.New(t)}
	db := f.db
	// seq_1_to_N is MariaDB's sequence engine; the plan test is about
	// MariaDB's statistics anyway.
	// The table as the RabbitMQ timer leaves it: the DONE tasks were
	// published two days ago, the due PENDING ones an hour ago, the later
	// ones and the rest never (published_at NULL). (Under the Redis timer
	// every row is NULL; its reconciler never reads published_at.)
	_, err := db.ExecContext(ctx, `INSERT INTO job_delay_task
		(trace_id, biz_uuid, handler, execute_time, next_attempt_time, payload_json, status, retry_count, max_retry,
		 last_error, claim_id, published_at, created_at, updated_at)
		SELECT CONCAT('t', seq), CONCAT('b', seq), IF(seq % 4 = 0, 'x', 'orderTimeoutClose'),
		       UTC_TIMESTAMP(3) - INTERVAL (20000 - seq) SECOND,
		       CASE WHEN seq % 100 < 85 THEN UTC_TIMESTAMP(3) - INTERVAL 2 DAY
		            WHEN seq % 100 < 90 THEN UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE
		            ELSE UTC_TIMESTAMP(3) + INTERVAL 1 DAY END,
		       '{}',
		       CASE WHEN seq % 100 < 85 THEN 'DONE' WHEN seq % 100 < 95 THEN 'PENDING'
		            WHEN seq % 100 < 97 THEN 'RUNNING' WHEN seq % 100 < 99 THEN 'FAILED' ELSE 'CANCELLED' END,
		       0, 3, '', IF(seq % 100 BETWEEN 95 AND 96, 9, 0),
		       CASE WHEN seq % 100 < 85 THEN UTC_TIMESTAMP(3) - INTERVAL 2 DAY
		            WHEN seq % 100 < 90 THEN UTC_TIMESTAMP(3) - INTERVAL 1 HOUR END, UTC_TIMESTAMP(3) - INTERVAL 3 DAY,
		       CASE WHEN seq % 100 < 85 THEN UTC_TIMESTAMP(3) - INTERVAL 2 DAY
		            WHEN seq % 100 = 95 THEN UTC_TIMESTAMP(3) - INTERVAL 2 HOUR
		            ELSE UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE END
		FROM seq_1_to_20000`)
	require.NoError(t, err)
	now, err := store{}.dbNow(ctx, db)
	require.NoError(t, err)
	f.now = now
	require.NoError(t, db.SelectContext(ctx, &f.due, `SELECT id FROM job_delay_task
		WHERE status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3) ORDER BY id LIMIT 200`))
	require.NoError(t, db.SelectContext(ctx, &f.running, `SELECT id FROM job_delay_task WHERE status = 'RUNNING' AND claim_id = 9 ORDER BY id LIMIT 200`))
	require.NoError(t, db.GetContext(ctx, &f.stuck, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'RUNNING' AND updated_at < UTC_TIMESTAMP(3) - INTERVAL 1 HOUR`))
	require.NoError(t, db.GetContext(ctx, &f.biz, `SELECT biz_uuid FROM job_delay_task WHERE status = 'FAILED' ORDER BY id LIMIT 1`))
	require.NoError(t, db.GetContext(ctx, &f.trace, `SELECT trace_id FROM job_delay_task WHERE biz_uuid = ?`, f.biz))
	require.NoError(t, db.GetContext(ctx, &f.dueCount, `SELECT COUNT(*) FROM job_delay_task WHERE status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3)`))
	require.Len(t, f.due, 200)
	require.NoError(t, db.SelectContext(ctx, &f.dueEntries, `SELECT id, next_attempt_time FROM job_delay_task
		WHERE status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3) ORDER BY id LIMIT 200`))
	for i := range f.dueEntries {
		f.dueEntries[i].Time = utcWall(f.dueEntries[i].Time)
	}
	require.NotEmpty(t, f.running)
	require.Positive(t, f.stuck)
	return f
}
