package delay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/internal/sqlexec"
)

// All SQL of the package lives here. Times in job_delay_task are UTC wall
// clock: the database's clock is UTC_TIMESTAMP(3) (independent of the
// session time_zone), and Go times are written as UTC text (dbTime) and read
// back as UTC whatever the DSN's loc (utcWall). Every state change is a
// conditional UPDATE whose WHERE repeats the expected state; finishing a
// claim also repeats its claim_id, so a runner whose task was recovered and
// claimed again writes nothing. Every change that makes a task PENDING at a
// new time clears published_at (the RabbitMQ timer's record that its
// broker holds a message for the schedule).

// store runs the package's statements, each method on the database or
// transaction it is given (as orders' store does). A statement with more
// than one parameter names them (:name, bound by sqlexec.Named from a
// params struct or a map); a list parameter is expanded there too.
type store struct{}

// execNamed runs a named statement that changes at most one row and says
// whether it did.
func execNamed(ctx context.Context, ext sqlx.ExecerContext, query string, arg any) (bool, error) {
	q, args, err := sqlexec.Named(query, arg)
	if err != nil {
		return false, err
	}
	return execOne(ctx, ext, q, args...)
}

const taskColumns = `id, trace_id, biz_uuid, handler, execute_time, next_attempt_time, payload_json,
	status, retry_count, max_retry, last_error, claim_id, created_at, updated_at`

const timeLayout = "2006-01-02 15:04:05.000"

// dbTime renders t as the UTC wall clock the table stores.
func dbTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// utcWall reads a DATETIME scanned in the DSN's loc as the UTC wall clock
// it is.
func utcWall(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

func (t *Task) normalize() {
	t.ExecuteTime = utcWall(t.ExecuteTime)
	t.NextAttemptTime = utcWall(t.NextAttemptTime)
	t.CreatedAt = utcWall(t.CreatedAt)
	t.UpdatedAt = utcWall(t.UpdatedAt)
}

func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// isDeadlock reports 1213: a deadlock, or on a Galera cluster a write that
// lost certification to another node's.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// selectNow reads the database clock. One row.
const selectNow = `SELECT UTC_TIMESTAMP(3)`

func (store) dbNow(ctx context.Context, q sqlx.QueryerContext) (time.Time, error) {
	var t time.Time
	if err := sqlx.GetContext(ctx, q, &t, selectNow); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return utcWall(t), nil
}

// insertTask adds a PENDING task; every value comes from Go so the caller
// knows the row without reading it back. Error 1062 on uk_biz_uuid means the
// task exists. Locks: the new row (and, in the caller's transaction, its
// unique-key entries until commit).
const insertTask = `INSERT INTO job_delay_task
	(trace_id, biz_uuid, handler, execute_time, next_attempt_time, payload_json,
	 status, retry_count, max_retry, last_error, claim_id, created_at, updated_at)
	VALUES (:trace_id, :biz_uuid, :handler, :execute_time, :next_attempt_time, :payload_json,
	 'PENDING', 0, :max_retry, '', 0, :created_at, :updated_at)`

// insertParams are insertTask's: a Task's values as the table stores them.
type insertParams struct {
	TraceID         string `db:"trace_id"`
	BizUUID         string `db:"biz_uuid"`
	Handler         string `db:"handler"`
	ExecuteTime     string `db:"execute_time"`
	NextAttemptTime string `db:"next_attempt_time"`
	Payload         string `db:"payload_json"`
	MaxRetry        int    `db:"max_retry"`
	CreatedAt       string `db:"created_at"`
	UpdatedAt       string `db:"updated_at"`
}

func (store) insert(ctx context.Context, ext sqlx.ExtContext, t *Task) error {
	q, args, err := sqlexec.Named(insertTask, insertParams{
		TraceID: t.TraceID, BizUUID: t.BizUUID, Handler: t.Handler,
		ExecuteTime: dbTime(t.ExecuteTime), NextAttemptTime: dbTime(t.NextAttemptTime),
		Payload: string(t.Payload), MaxRetry: t.MaxRetry,
		CreatedAt: dbTime(t.CreatedAt), UpdatedAt: dbTime(t.UpdatedAt),
	})
	if err != nil {
		return err
	}
	res, err := ext.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("insert task %s: %w", t.BizUUID, err)
	}
	t.ID = id
	return nil
}

// selectByBizUUID reads one task; selectByBizUUIDShared does it as a locking
// read, which sees the latest committed row even inside a REPEATABLE READ
// transaction whose snapshot predates it (after a duplicate-key error).
const (
	selectByBizUUID       = `SELECT ` + taskColumns + ` FROM job_delay_task WHERE biz_uuid = ?`
	selectByBizUUIDShared = selectByBizUUID + ` LOCK IN SHARE MODE`
)

func (store) get(ctx context.Context, q sqlx.QueryerContext, bizUUID string, locking bool) (*Task, error) {
	query := selectByBizUUID
	if locking {
		query = selectByBizUUIDShared
	}
	return getTask(ctx, q, "task "+bizUUID, query, bizUUID)
}

// getTask reads the one task query finds, ErrNotFound when there is none;
// what names it in an error.
func getTask(ctx context.Context, q sqlx.QueryerContext, what, query string, arg any) (*Task, error) {
	t, err := sqlexec.GetOne[Task](ctx, q, query, arg)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if t == nil {
		return nil, ErrNotFound
	}
	t.normalize()
	return t, nil
}

// cancelTask moves a PENDING or FAILED task to CANCELLED. 0 or 1 row; the
// caller reads the row to tell "not found" from "not cancellable".
const cancelTask = `UPDATE job_delay_task
	SET status = 'CANCELLED', claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE biz_uuid = ? AND status IN ('PENDING', 'FAILED')`

func (store) cancel(ctx context.Context, ext sqlx.ExtContext, bizUUID string) (bool, error) {
	return execOne(ctx, ext, cancelTask, bizUUID)
}

// requeueTask gives a FAILED task a fresh set of retries, due now. 0 or 1 row.
const requeueTask = `UPDATE job_delay_task
	SET status = 'PENDING', retry_count = 0, next_attempt_time = UTC_TIMESTAMP(3),
	    published_at = NULL, claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE biz_uuid = ? AND status = 'FAILED'`

func (store) requeue(ctx context.Context, ext sqlx.ExtContext, bizUUID string) (bool, error) {
	return execOne(ctx, ext, requeueTask, bizUUID)
}

// claimTasks is the claim: PENDING and due → RUNNING under a fresh claim_id,
// one statement for a batch of ids. Every statement here that lists ids
// names the primary key: popped ids are often mostly no longer PENDING, and
// with few rows left in the status the optimizer would walk the status index
// instead of the list. Rows locked in primary-key order (so two
// claimers never deadlock); a row another claimer took first no longer
// matches and is skipped. The due check stops a stale timer entry from
// running a task early.
const claimTasks = `UPDATE job_delay_task FORCE INDEX (PRIMARY)
	SET status = 'RUNNING', claim_id = :claim_id, updated_at = UTC_TIMESTAMP(3)
	WHERE id IN (:ids) AND status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3)`

// claimParams are the parameters of the statements about one claim: its
// claim_id, the task ids, and for claimTasksOf and claimTasksNotOf the
// batch handlers' names and how many others to claim at most.
type claimParams struct {
	ClaimID  int64    `db:"claim_id"`
	IDs      []int64  `db:"ids"`
	Handlers []string `db:"handlers"`
	Limit    int      `db:"limit"`
}

// selectClaimed reads back the rows a claim took.
const selectClaimed = `SELECT ` + taskColumns + ` FROM job_delay_task FORCE INDEX (PRIMARY)
	WHERE id IN (:ids) AND claim_id = :claim_id AND status = 'RUNNING'`

// unclaimTasks gives back, due as they were and without spending a retry,
// the rows a claim took but could not read back: nobody runs them, and left
// RUNNING they would wait for recovery (which spends a retry).
const unclaimTasks = `UPDATE job_delay_task FORCE INDEX (PRIMARY)
	SET status = 'PENDING', published_at = NULL, claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id IN (:ids) AND status = 'RUNNING' AND claim_id = :claim_id`

// claimTasksOf is claimTasks for the tasks of the given handlers only;
// claimTasksNotOf for the others, at most a given number, lowest ids
// first. Together they claim what the poller can run: every popped task of
// a batch handler, and single-handler tasks up to the free worker slots
// (the rest stay PENDING and go back on the timer). Same locks as
// claimTasks.
const (
	claimTasksOf    = claimTasks + ` AND handler IN (:handlers)`
	claimTasksNotOf = claimTasks + ` AND handler NOT IN (:handlers) ORDER BY id LIMIT :limit`
)

// claimSplit asks store.claim to claim the ids whose handler is one of
// batchNames, then at most singles(n) of the others, n being how many the
// first statement claimed.
type claimSplit struct {
	batchNames []string
	singles    func(n int) int
}

// claim claims the popped ids under claimID (all of them, or as split
// says) and reads the claimed rows back, on one connection. If the
// read-back fails, the claim is given back at once (unclaimTasks) and the
// error returned. afterClaim, if set (tests), runs between the claim and
// the read-back, on the claim's connection.
func (st store) claim(ctx context.Context, db *sqlx.DB, ids []int64, claimID int64, split *claimSplit, afterClaim func(context.Context, *sqlx.Conn)) ([]*Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim %d tasks: %w", len(ids), err)
	}
	defer conn.Close()
	// On a Galera node the claim must see a task registered through
	// another node a moment ago: the timer may pop it before this node
	// has applied its row, and a claim that found it not PENDING would
	// drop it from the timer until the reconciler puts it back.
	restore, err := sqlexec.Causal(ctx, db, conn)
	if err != nil {
		return nil, fmt.Errorf("claim %d tasks: %w", len(ids), err)
	}
	defer restore()
	exec := func(query string, p claimParams) (int, error) {
		q, args, err := sqlexec.Named(query, p)
		if err != nil {
			return 0, err
		}
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, fmt.Errorf("claim %d tasks: %w", len(ids), err)
		}
		n, err := res.RowsAffected()
		return int(n), err
	}
	var n int
	if split == nil {
		if n, err = exec(claimTasks, claimParams{ClaimID: claimID, IDs: ids}); err != nil {
			return nil, err
		}
	} else {
		if n, err = exec(claimTasksOf, claimParams{ClaimID: claimID, IDs: ids, Handlers: split.batchNames}); err != nil {
			return nil, err
		}
		if n < len(ids) {
			if k := split.singles(n); k > 0 {
				m, err := exec(claimTasksNotOf, claimParams{ClaimID: claimID, IDs: ids, Handlers: split.batchNames, Limit: k})
				if err != nil && n == 0 {
					return nil, err
				}
				// Otherwise the batch tasks are claimed: hand them out;
				// the others stay PENDING for the next look.
				n += m
			}
		}
	}
	if n == 0 {
		return nil, nil
	}
	if afterClaim != nil {
		afterClaim(ctx, conn)
	}
	tasks, err := st.readClaimed(ctx, conn, ids, claimID)
	if err == nil {
		return tasks, nil
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	q, args, qerr := sqlexec.Named(unclaimTasks, claimParams{ClaimID: claimID, IDs: ids})
	if qerr == nil {
		_, qerr = db.ExecContext(uctx, q, args...)
	}
	if qerr != nil {
		return nil, fmt.Errorf("%w; giving the claim back failed too, its tasks wait for recovery: %w", err, qerr)
	}
	return nil, fmt.Errorf("%w (the claim was given back)", err)
}

// readClaimed reads back the rows of ids that the claim claimID took.
func (store) readClaimed(ctx context.Context, q sqlx.QueryerContext, ids []int64, claimID int64) ([]*Task, error) {
	var tasks []*Task
	if err := sqlexec.SelectNamed(ctx, q, &tasks, selectClaimed, claimParams{ClaimID: claimID, IDs: ids}); err != nil {
		return nil, fmt.Errorf("read claimed tasks: %w", err)
	}
	for _, t := range tasks {
		t.normalize()
	}
	return tasks, nil
}

// selectPendingTimes reads when PENDING tasks among ids are due, to put a
// timer entry back after a claim found one not yet due.
const selectPendingTimes = `SELECT id, next_attempt_time, retry_count + 1 AS attempt FROM job_delay_task FORCE INDEX (PRIMARY)
	WHERE id IN (?) AND status = 'PENDING'`

func (store) pendingTimes(ctx context.Context, db *sqlx.DB, ids []int64) ([]timerEntry, error) {
	q, args, err := sqlx.In(selectPendingTimes, ids)
	if err != nil {
		return nil, err
	}
	var out []timerEntry
	if err := db.SelectContext(ctx, &out, db.Rebind(q), args...); err != nil {
		return nil, fmt.Errorf("read pending times: %w", err)
	}
	for i := range out {
		out[i].Time = utcWall(out[i].Time)
	}
	return out, nil
}

// finishDone ends a successful claim. 1 row, or 0 if the claim was lost
// (recovered and claimed again): then someone else owns the task.
const finishDone = `UPDATE job_delay_task
	SET status = 'DONE', claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id = :id AND status = 'RUNNING' AND claim_id = :claim_id`

// finishRetry ends a failed claim with another attempt due later (NULL:
// now); it also recovers a stuck claim. 0 or 1 row, as finishDone.
const finishRetry = `UPDATE job_delay_task
	SET status = 'PENDING', retry_count = retry_count + 1, next_attempt_time = COALESCE(:next, UTC_TIMESTAMP(3)),
	    last_error = :last_error, published_at = NULL, claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id = :id AND status = 'RUNNING' AND claim_id = :claim_id`

// finishFailed ends a claim out of retries (or with a permanent error).
const finishFailed = `UPDATE job_delay_task
	SET status = 'FAILED', retry_count = retry_count + 1, last_error = :last_error,
	    claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id = :id AND status = 'RUNNING' AND claim_id = :claim_id`

// rescheduleClaim gives back a claim without spending a retry: one cut
// short by shutdown (due now), one whose attempt said "not now" (due after
// the not-now backoff), one that came before its due time (execute time and
// next attempt moved to it). 0 or 1 row, as finishDone.
const rescheduleClaim = `UPDATE job_delay_task
	SET status = 'PENDING', next_attempt_time = COALESCE(:next, UTC_TIMESTAMP(3)), execute_time = :execute_time,
	    last_error = :last_error, published_at = NULL, claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id = :id AND status = 'RUNNING' AND claim_id = :claim_id`

// finishParams are the parameters of the statements that end one claim.
type finishParams struct {
	ID        int64  `db:"id"`
	ClaimID   int64  `db:"claim_id"`
	Next      any    `db:"next"` // nextParam
	Execute   string `db:"execute_time"`
	LastError string `db:"last_error"`
}

// finishDoneMany and lockClaimedRunning end many successful claims of one
// claim_id in one transaction. Most often every claim of the batch still
// holds, and finishDoneMany alone, its changed-row count equal to the
// number of ids, says so (locks: those rows, in primary-key order). When
// it changed fewer, some claim was lost (recovered and claimed again) and
// the count cannot tell whose: that transaction is rolled back, and a
// second one locks the rows still RUNNING under the claim
// (lockClaimedRunning), learning which they are, then marks those DONE. A
// row whose claim was lost is never written.
const (
	finishDoneMany = `UPDATE job_delay_task FORCE INDEX (PRIMARY)
	SET status = 'DONE', claim_id = 0, updated_at = UTC_TIMESTAMP(3)
	WHERE id IN (:ids) AND status = 'RUNNING' AND claim_id = :claim_id`
	lockClaimedRunning = `SELECT id FROM job_delay_task FORCE INDEX (PRIMARY)
	WHERE id IN (:ids) AND status = 'RUNNING' AND claim_id = :claim_id ORDER BY id FOR UPDATE`
)

// doneMany records DONE for the tasks of ids claimed under claimID and
// returns those it wrote (the others' claims were lost).
func (st store) doneMany(ctx context.Context, db *sqlx.DB, ids []int64, claimID int64) (map[int64]bool, error) {
	done, err := st.doneAll(ctx, db, ids, claimID)
	if done != nil || err != nil {
		return done, err
	}
	return st.doneOwned(ctx, db, ids, claimID)
}

// doneAll is doneMany's first try: one UPDATE of every id in a
// transaction (the session's own isolation: the rows are reached through
// the primary key, so it locks only them), committed only when it changed
// every row. nil, nil: it changed fewer and was rolled back.
func (store) doneAll(ctx context.Context, db *sqlx.DB, ids []int64, claimID int64) (map[int64]bool, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	n, err := execIn(ctx, tx, finishDoneMany, ids, claimID)
	if err != nil {
		return nil, fmt.Errorf("record %d tasks done: %w", len(ids), err)
	}
	if n != int64(len(ids)) {
		return nil, nil
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("record %d tasks done: commit: %w", len(ids), err)
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	return done, nil
}

// doneOwned is doneMany after a lost claim: lock the rows still
// under the claim, mark those DONE, return them.
func (store) doneOwned(ctx context.Context, db *sqlx.DB, ids []int64, claimID int64) (map[int64]bool, error) {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var owned []int64
	if err := sqlexec.SelectNamed(ctx, tx, &owned, lockClaimedRunning, claimParams{ClaimID: claimID, IDs: ids}); err != nil {
		return nil, fmt.Errorf("lock %d claimed tasks: %w", len(ids), err)
	}
	done := make(map[int64]bool, len(owned))
	if len(owned) == 0 {
		return done, nil
	}
	n, err := execIn(ctx, tx, finishDoneMany, owned, claimID)
	if err != nil {
		return nil, fmt.Errorf("record %d tasks done: %w", len(owned), err)
	}
	if n != int64(len(owned)) {
		return nil, fmt.Errorf("record %d tasks done: %d rows changed", len(owned), n)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("record %d tasks done: commit: %w", len(owned), err)
	}
	for _, id := range owned {
		done[id] = true
	}
	return done, nil
}

// execIn runs an UPDATE of the ids of claim claimID (claimParams) and
// returns how many rows it changed.
func execIn(ctx context.Context, tx *sqlx.Tx, query string, ids []int64, claimID int64) (int64, error) {
	q, args, err := sqlexec.Named(query, claimParams{ClaimID: claimID, IDs: ids})
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (store) done(ctx context.Context, ext sqlx.ExecerContext, t *Task) (bool, error) {
	return execNamed(ctx, ext, finishDone, finishParams{ID: t.ID, ClaimID: t.ClaimID})
}

// nextParam is a next attempt time as finishRetry and rescheduleClaim take
// it: zero means now by the database's clock (which the claim's due check
// reads, where the local estimate may be a millisecond ahead).
func nextParam(next time.Time) any {
	if next.IsZero() {
		return nil
	}
	return dbTime(next)
}

func (store) retry(ctx context.Context, ext sqlx.ExecerContext, t *Task, next time.Time, lastErr string) (bool, error) {
	return execNamed(ctx, ext, finishRetry, finishParams{ID: t.ID, ClaimID: t.ClaimID, Next: nextParam(next), LastError: truncate(lastErr, 2000)})
}

func (store) failed(ctx context.Context, ext sqlx.ExecerContext, t *Task, lastErr string) (bool, error) {
	return execNamed(ctx, ext, finishFailed, finishParams{ID: t.ID, ClaimID: t.ClaimID, LastError: truncate(lastErr, 2000)})
}

func (store) reschedule(ctx context.Context, ext sqlx.ExecerContext, t *Task, next, execute time.Time, why string) (bool, error) {
	return execNamed(ctx, ext, rescheduleClaim, finishParams{ID: t.ID, ClaimID: t.ClaimID, Next: nextParam(next),
		Execute: dbTime(execute), LastError: truncate(why, 2000)})
}

// selectStuck finds claims RUNNING longer than the limit, in one shard
// (shard.Match("id"); 1 and 0 for all), walking the RUNNING entries of
// idx_status_next_attempt (its status prefix: as many as claims are in
// flight, so sorting them by updated_at is cheap; the index is named, like
// every range scan here, so that no statistics can turn it into a table
// scan). No index has updated_at: a claim and a DONE change it, and each
// index holding it would be rewritten by both. Consistent read, no locks: each
// is then recovered by finishRetry/finishFailed with its claim_id, so one
// finishing meanwhile is left alone.
var selectStuck = `SELECT ` + taskColumns + ` FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
	WHERE status = 'RUNNING' AND updated_at < UTC_TIMESTAMP(3) - INTERVAL :age_us MICROSECOND
	  AND ` + shard.Match("id") + `
	ORDER BY updated_at LIMIT :limit`

// shardParams are selectStuck's and selectDue's: the age in microseconds
// (RUNNING since, due since), the shard and the most rows.
type shardParams struct {
	AgeUS      int64 `db:"age_us"`
	ShardTotal int   `db:"shard_total"`
	ShardIndex int   `db:"shard_index"`
	Limit      int   `db:"limit"`
}

func (store) stuck(ctx context.Context, db *sqlx.DB, limit time.Duration, shard, total, n int) ([]*Task, error) {
	var tasks []*Task
	p := shardParams{AgeUS: limit.Microseconds(), ShardTotal: total, ShardIndex: shard, Limit: n}
	if err := sqlexec.SelectNamed(ctx, db, &tasks, selectStuck, p); err != nil {
		return nil, fmt.Errorf("find stuck tasks: %w", err)
	}
	for _, t := range tasks {
		t.normalize()
	}
	return tasks, nil
}

// selectDue finds PENDING tasks due for longer than grace (missed by the
// timer), oldest first, in one shard. Consistent read over
// idx_status_next_attempt; the claim that follows is the CAS.
var selectDue = `SELECT id FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
	WHERE status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3) - INTERVAL :age_us MICROSECOND
	  AND ` + shard.Match("id") + `
	ORDER BY next_attempt_time LIMIT :limit`

func (store) due(ctx context.Context, db *sqlx.DB, grace time.Duration, shard, total, n int) ([]int64, error) {
	var ids []int64
	p := shardParams{AgeUS: grace.Microseconds(), ShardTotal: total, ShardIndex: shard, Limit: n}
	if err := sqlexec.SelectNamed(ctx, db, &ids, selectDue, p); err != nil {
		return nil, fmt.Errorf("find due tasks: %w", err)
	}
	return ids, nil
}

// selectTimerPage pages PENDING tasks due before a horizon, in
// (next_attempt_time, id) order, after a keyset position, for the
// reconciler. Consistent read over idx_status_next_attempt (whose entries
// carry the id, so the order needs no sort).
const selectTimerPage = `SELECT id, next_attempt_time FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
	WHERE status = 'PENDING' AND next_attempt_time < :before
	  AND next_attempt_time >= :after_at AND (next_attempt_time > :after_at OR id > :after_id)
	ORDER BY next_attempt_time, id LIMIT :limit`

// pageParams are the parameters of the reconcilers' keyset pages: rows
// before a cutoff (and, for selectOverdue, published before another),
// after the position (after_at, after_id), at most limit.
type pageParams struct {
	Before          string `db:"before"`
	PublishedBefore string `db:"published_before"`
	AfterAt         string `db:"after_at"`
	AfterID         int64  `db:"after_id"`
	Limit           int    `db:"limit"`
}

func (store) timerPage(ctx context.Context, db *sqlx.DB, horizon time.Time, after timerEntry, n int) ([]timerEntry, error) {
	var out []timerEntry
	p := pageParams{Before: dbTime(horizon), AfterAt: dbTime(after.Time), AfterID: after.ID, Limit: n}
	if err := sqlexec.SelectNamed(ctx, db, &out, selectTimerPage, p); err != nil {
		return nil, fmt.Errorf("page pending tasks: %w", err)
	}
	for i := range out {
		out[i].Time = utcWall(out[i].Time)
	}
	return out, nil
}

// markPublishedHead, followed by one "(?, ?)" per task and ")", records
// that the broker confirmed the message of each task's current schedule:
// only a row still PENDING at the time the message carries, so a confirm
// that arrives after the task was rescheduled marks nothing. Primary-key
// range (named: the (id, time) list could otherwise plan over
// idx_status_next_attempt); no other locks. The plain id list beside the
// pairs is what makes it a range: MariaDB 10.11 turns a one-pair IN into
// an equality on the row value and then scans the whole primary key
// (EXPLAIN: type index, every row), which the RabbitMQ timer's marks of
// one confirm at a time did at every publish.
const markPublishedHead = `UPDATE job_delay_task FORCE INDEX (PRIMARY) SET published_at = UTC_TIMESTAMP(3)
	WHERE status = 'PENDING' AND id IN (`

func (store) markPublished(ctx context.Context, db sqlx.ExecerContext, entries []timerEntry) error {
	const chunk = 500
	for len(entries) > 0 {
		n := min(len(entries), chunk)
		q, args := markPublishedQuery(entries[:n])
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("record %d tasks published: %w", n, err)
		}
		entries = entries[n:]
	}
	return nil
}

// markPublishedQuery is the markPublishedHead statement for entries: the
// ids, then the (id, time) pairs.
func markPublishedQuery(entries []timerEntry) (string, []any) {
	var q strings.Builder
	q.WriteString(markPublishedHead)
	args := make([]any, 0, 3*len(entries))
	for i, e := range entries {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("?")
		args = append(args, e.ID)
	}
	q.WriteString(") AND (id, next_attempt_time) IN (")
	for i, e := range entries {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, e.ID, dbTime(e.Time))
	}
	q.WriteString(")")
	return q.String(), args
}

// getReconcileLock takes the server's named lock of the RabbitMQ
// reconciler of this database and name prefix (hashed: names are at most 64
// characters) without waiting: 1 when taken, 0 when another session holds
// it. It is held on one connection for one reconcile and released by
// releaseReconcileLock (or by the connection's end), so that the
// dispatchers of several executors, reconciling on the same ticks, never
// publish the same tasks again at once.
const (
	reconcileLockName    = `CONCAT('delay.rabbitmq:', LEFT(SHA2(CONCAT(DATABASE(), '/', ?), 256), 40))`
	getReconcileLock     = `SELECT GET_LOCK(` + reconcileLockName + `, 0)`
	releaseReconcileLock = `SELECT RELEASE_LOCK(` + reconcileLockName + `)`
)

// reconcileLock takes the reconciler's lock for prefix on a
// connection of its own; ok is false when another holds it. release gives
// it back.
func (store) reconcileLock(ctx context.Context, db *sqlx.DB, prefix string) (release func(), ok bool, err error) {
	conn, err := db.Connx(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("reconciler lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.GetContext(ctx, &got, getReconcileLock, prefix); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("reconciler lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, false, nil
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(rctx, releaseReconcileLock, prefix)
		conn.Close()
	}, true, nil
}

// republishRow is a task the RabbitMQ reconciler publishes again; At is
// its keyset position (updated_at or next_attempt_time).
type republishRow struct {
	timerEntry
	At time.Time `db:"at"`
}

// selectUnpublished pages PENDING tasks whose current schedule was never
// confirmed published and that last changed before a cutoff (so a publish
// still in flight is left alone), in (next_attempt_time, id) order after a
// keyset position. Consistent read over the published_at IS NULL entries of
// idx_published_next (published_at, next_attempt_time): neither column
// changes with a claim or a DONE, so neither rewrites the index. It walks
// every row never confirmed: the PENDING ones it wants, and tasks that
// ended before a confirm was recorded (few under the RabbitMQ timer; every
// row the Redis timer wrote, until the purge removes them).
const selectUnpublished = `SELECT id, next_attempt_time, retry_count + 1 AS attempt, next_attempt_time AS at
	FROM job_delay_task FORCE INDEX (idx_published_next)
	WHERE published_at IS NULL AND status = 'PENDING' AND updated_at < :before
	  AND next_attempt_time >= :after_at AND (next_attempt_time > :after_at OR id > :after_id)
	ORDER BY next_attempt_time, id LIMIT :limit`

// selectOverdue pages PENDING tasks due before a cutoff whose message was
// confirmed before another (so it was lost or purged, or is waiting behind
// a backlog), in (next_attempt_time, id) order after a keyset position.
// Consistent read over idx_status_next_attempt; the rows overdue but
// published since are read and skipped.
const selectOverdue = `SELECT id, next_attempt_time, retry_count + 1 AS attempt, next_attempt_time AS at
	FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
	WHERE status = 'PENDING' AND next_attempt_time < :before AND published_at < :published_before
	  AND next_attempt_time >= :after_at AND (next_attempt_time > :after_at OR id > :after_id)
	ORDER BY next_attempt_time, id LIMIT :limit`

// republishPage runs selectUnpublished or selectOverdue: rows before
// the cutoff (changed before it; overdue at it and published before it),
// after the keyset position after.
func (store) republishPage(ctx context.Context, db *sqlx.DB, query string, cutoff time.Time, after republishRow, n int) ([]republishRow, error) {
	c := dbTime(cutoff)
	p := pageParams{Before: c, PublishedBefore: c, AfterAt: dbTime(after.At), AfterID: after.ID, Limit: n}
	var out []republishRow
	if err := sqlexec.SelectNamed(ctx, db, &out, query, p); err != nil {
		return nil, fmt.Errorf("page tasks to publish: %w", err)
	}
	for i := range out {
		out[i].Time, out[i].At = utcWall(out[i].Time), utcWall(out[i].At)
	}
	return out, nil
}

// purgeTasks deletes up to n DONE or CANCELLED tasks untouched for longer
// than the retention, over idx_status_next_attempt's range of those
// statuses due before the cutoff: a DONE task was claimed after it fell
// due and finished after its claim, so one untouched since the cutoff was
// due before it; a CANCELLED one waits until its due time, had it run, is
// older than the retention too.
const purgeTasks = `DELETE FROM job_delay_task
	WHERE status IN ('DONE', 'CANCELLED') AND next_attempt_time < UTC_TIMESTAMP(3) - INTERVAL :retention_us MICROSECOND
	  AND updated_at < UTC_TIMESTAMP(3) - INTERVAL :retention_us MICROSECOND
	LIMIT :limit`

func (store) purge(ctx context.Context, db *sqlx.DB, retention time.Duration, n int) (int64, error) {
	q, args, err := sqlexec.Named(purgeTasks, map[string]any{"retention_us": retention.Microseconds(), "limit": n})
	if err != nil {
		return 0, err
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("purge tasks: %w", err)
	}
	return res.RowsAffected()
}

// Operator queries: counts by status (a scan of idx_status_next_attempt),
// the backlog due now, stuck claims (the RUNNING entries of
// idx_status_next_attempt), duplicates.
const (
	countByStatus = `SELECT status, COUNT(*) AS n FROM job_delay_task GROUP BY status`
	countDue      = `SELECT COUNT(*) AS n, MIN(next_attempt_time) AS oldest FROM job_delay_task
		WHERE status = 'PENDING' AND next_attempt_time <= UTC_TIMESTAMP(3)`
	countStuck = `SELECT COUNT(*) FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
		WHERE status = 'RUNNING' AND updated_at < UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND`
	duplicateBizUUIDs = `SELECT biz_uuid AS value, COUNT(*) AS n FROM job_delay_task
		GROUP BY biz_uuid HAVING COUNT(*) > 1 ORDER BY n DESC LIMIT 100`
	duplicateTraceIDs = `SELECT trace_id AS value, COUNT(*) AS n FROM job_delay_task
		GROUP BY trace_id HAVING COUNT(*) > 1 ORDER BY n DESC LIMIT 100`
)

func (st store) stats(ctx context.Context, db *sqlx.DB, runningLimit time.Duration) (*Stats, error) {
	s := &Stats{Counts: map[Status]int64{}, RunningTimeout: Duration(runningLimit)}
	for _, st := range Statuses {
		s.Counts[st] = 0
	}
	now, err := st.dbNow(ctx, db)
	if err != nil {
		return nil, err
	}
	s.DBTime = now
	var rows []struct {
		Status Status `db:"status"`
		N      int64  `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, countByStatus); err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	for _, r := range rows {
		s.Counts[r.Status] = r.N
		s.Total += r.N
	}
	var due struct {
		N      int64        `db:"n"`
		Oldest sql.NullTime `db:"oldest"`
	}
	if err := db.GetContext(ctx, &due, countDue); err != nil {
		return nil, fmt.Errorf("count due tasks: %w", err)
	}
	s.DueNow = due.N
	if due.Oldest.Valid {
		t := utcWall(due.Oldest.Time)
		s.OldestDue = &t
		s.OldestDueAge = Duration(now.Sub(t))
	}
	if err := db.GetContext(ctx, &s.StuckRunning, countStuck, runningLimit.Microseconds()); err != nil {
		return nil, fmt.Errorf("count stuck tasks: %w", err)
	}
	return s, nil
}

func (store) duplicates(ctx context.Context, db *sqlx.DB) (biz, trace []Duplicate, err error) {
	if err := db.SelectContext(ctx, &biz, duplicateBizUUIDs); err != nil {
		return nil, nil, fmt.Errorf("find duplicate bizUuids: %w", err)
	}
	if err := db.SelectContext(ctx, &trace, duplicateTraceIDs); err != nil {
		return nil, nil, fmt.Errorf("find duplicate trace ids: %w", err)
	}
	return biz, trace, nil
}

// listTasks pages tasks newest first (id DESC) with optional filters; the
// status filter uses idx_status_updated's leading column.
const listTasksBase = `SELECT ` + taskColumns + ` FROM job_delay_task`

func (store) list(ctx context.Context, db *sqlx.DB, f ListFilter) ([]*Task, error) {
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(f.Status))
	}
	if f.Handler != "" {
		where = append(where, "handler = ?")
		args = append(args, f.Handler)
	}
	if f.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, f.BeforeID)
	}
	q := listTasksBase
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	tasks := []*Task{}
	if err := db.SelectContext(ctx, &tasks, q, args...); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for _, t := range tasks {
		t.normalize()
	}
	return tasks, nil
}

func execOne(ctx context.Context, ext sqlx.ExecerContext, query string, args ...any) (bool, error) {
	res, err := ext.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// selectByTraceID reads one task through uk_trace_id.
const selectByTraceID = `SELECT ` + taskColumns + ` FROM job_delay_task FORCE INDEX (uk_trace_id) WHERE trace_id = ?`

func (store) getByTrace(ctx context.Context, q sqlx.QueryerContext, traceID string) (*Task, error) {
	return getTask(ctx, q, "task with trace id "+traceID, selectByTraceID, traceID)
}

// The operator's task lists read a window of keys, the handler filter
// ("" for any) evaluated on each row: newest id first over the primary key,
// or, for one status, latest due first over idx_status_next_attempt
// (status, next_attempt_time, id). Both start before the cursor. No locks;
// up to window keys.
const (
	taskWindowByID = `SELECT id, next_attempt_time AS at, (:handler = '' OR handler = :handler) AS hit
	FROM job_delay_task FORCE INDEX (PRIMARY)
	WHERE id < :before_id ORDER BY id DESC LIMIT :window`
	taskWindowByStatus = `SELECT id, next_attempt_time AS at, (:handler = '' OR handler = :handler) AS hit
	FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
	WHERE status = :status AND (next_attempt_time < :before_at OR (next_attempt_time = :before_at AND id < :before_id))
	ORDER BY next_attempt_time DESC, id DESC LIMIT :window`
)

// windowParams are the task window statements' parameters.
type windowParams struct {
	Handler  string `db:"handler"`
	Status   string `db:"status"`
	BeforeAt string `db:"before_at"`
	BeforeID int64  `db:"before_id"`
	Window   int    `db:"window"`
}

func (store) taskWindow(ctx context.Context, q sqlx.QueryerContext, f TaskQuery, window int) ([]taskWindowKey, error) {
	var keys []taskWindowKey
	var err error
	p := windowParams{Handler: f.Handler, Window: window}
	if f.Status == "" {
		p.BeforeID = f.After.BeforeID()
		err = sqlexec.SelectNamed(ctx, q, &keys, taskWindowByID, p)
	} else {
		at, id := f.After.Before(sqlexec.Latest)
		p.Status, p.BeforeAt, p.BeforeID = string(f.Status), dbTime(at), id
		err = sqlexec.SelectNamed(ctx, q, &keys, taskWindowByStatus, p)
	}
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return keys, nil
}

// selectTasksByID reads listed tasks through the primary key.
const selectTasksByID = `SELECT ` + taskColumns + ` FROM job_delay_task FORCE INDEX (PRIMARY) WHERE id IN (?)`

func (store) tasksByID(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]*Task, error) {
	tasks := []*Task{}
	if len(ids) == 0 {
		return tasks, nil
	}
	query, args, err := sqlx.In(selectTasksByID, ids)
	if err != nil {
		return nil, err
	}
	if err := sqlx.SelectContext(ctx, q, &tasks, query, args...); err != nil {
		return nil, fmt.Errorf("read %d tasks: %w", len(ids), err)
	}
	for _, t := range tasks {
		t.normalize()
	}
	return tasks, nil
}

// Bounded counts for Tallies, each at most a cap of index entries, no
// locks, all over idx_status_next_attempt: tasks of one status, PENDING and
// due by now with the oldest due time, RUNNING since before a time (the
// RUNNING entries, as many as claims in flight, each row's updated_at
// read).
const (
	countStatusCapped = `SELECT COUNT(*) FROM (
		SELECT 1 FROM job_delay_task FORCE INDEX (idx_status_next_attempt) WHERE status = :status LIMIT :cap) t`
	countDueCapped = `SELECT COUNT(*) AS n, MIN(t.next_attempt_time) AS oldest FROM (
		SELECT next_attempt_time FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
		WHERE status = 'PENDING' AND next_attempt_time <= :now ORDER BY next_attempt_time LIMIT :cap) t`
	countStuckCapped = `SELECT COUNT(*) FROM (
		SELECT 1 FROM job_delay_task FORCE INDEX (idx_status_next_attempt)
		WHERE status = 'RUNNING' AND updated_at < :before LIMIT :cap) t`
)

func (store) countStatus(ctx context.Context, q sqlx.QueryerContext, st Status, limit int) (int, error) {
	var n int
	if err := sqlexec.GetNamed(ctx, q, &n, countStatusCapped, map[string]any{"status": string(st), "cap": limit}); err != nil {
		return 0, fmt.Errorf("count %s tasks: %w", st, err)
	}
	return n, nil
}

func (store) countDue(ctx context.Context, q sqlx.QueryerContext, now time.Time, limit int) (int, time.Time, error) {
	var r struct {
		N      int          `db:"n"`
		Oldest sql.NullTime `db:"oldest"`
	}
	if err := sqlexec.GetNamed(ctx, q, &r, countDueCapped, map[string]any{"now": dbTime(now), "cap": limit}); err != nil {
		return 0, time.Time{}, fmt.Errorf("count due tasks: %w", err)
	}
	if !r.Oldest.Valid {
		return r.N, time.Time{}, nil
	}
	return r.N, utcWall(r.Oldest.Time), nil
}

func (store) countStuck(ctx context.Context, q sqlx.QueryerContext, before time.Time, limit int) (int, error) {
	var n int
	if err := sqlexec.GetNamed(ctx, q, &n, countStuckCapped, map[string]any{"before": dbTime(before), "cap": limit}); err != nil {
		return 0, fmt.Errorf("count stuck tasks: %w", err)
	}
	return n, nil
}
