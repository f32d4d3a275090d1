package orders

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This file runs the SQL of the dead-letter retry job (RetryDeadLetters;
// the statements are in package closesql). The close path's own
// dead-letter statements (upsert on failure, resolve on success, the
// sweep's probe) run in store.go; the retry job reuses them through
// CloseOrder. The operator view's are in package deadletters.

// dueLetter is a waiting close dead letter whose retry time has come.
type dueLetter struct {
	ID          int64     `db:"id"`
	OrderNo     string    `db:"order_no"`
	Attempts    int       `db:"attempts"`
	NextRetryAt time.Time `db:"next_retry_at"`
}

// dueLetterParams are closesql.DueLetters's: the order table, one shard of its
// letters, the run's clock, the cursor and the page size.
type dueLetterParams struct {
	Table      string    `db:"table"`
	ShardIndex int       `db:"shard_index"`
	ShardTotal int       `db:"shard_total"`
	Now        time.Time `db:"now"`
	AfterAt    time.Time `db:"after_at"`
	AfterID    int64     `db:"after_id"`
	Limit      int       `db:"limit"`
}

func (store) dueLetters(ctx context.Context, q sqlx.QueryerContext, p dueLetterParams) ([]dueLetter, error) {
	var rows []dueLetter
	if err := sqlexec.SelectNamed(ctx, q, &rows, closesql.DueLetters, p); err != nil {
		return nil, fmt.Errorf("scan due dead letters of table %q after (%s, %d): %w", p.Table, p.AfterAt.Format(time.DateTime), p.AfterID, err)
	}
	return rows, nil
}

// rerunDB runs each statement autocommit on db, and again when the server
// rolled it back as a deadlock's victim (server.RolledBack: nothing of it
// was applied), up to backoff.DeadlockRuns runs spaced by
// backoff.Contention. The retry job's claim, settle and note are single
// UPDATEs by id that also move the letter's entries in the indexes on
// status, next_retry_at and updated_at, and the close's dead-letter upsert
// (Closer.deadLetter) locks a letter's uk_order_stage entry and row and
// moves them too; runs of several executors on one table, or any other
// transaction on those index ranges, can deadlock with them, and one lost
// statement must not end the whole run. A lock wait timeout is not
// run again: it spent innodb_lock_wait_timeout already. Never a
// transaction's statement: a deadlock rolls back the whole transaction.
type rerunDB struct {
	db     *sqlx.DB
	server dbserver.Server
}

func (r rerunDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := backoff.Retry(ctx, backoff.Contention, backoff.DeadlockRuns, func(ctx context.Context, _ int) (retry bool, err error) {
		res, err = r.db.ExecContext(ctx, query, args...)
		return r.server.RolledBack(err), err
	})
	return res, err
}

func (store) claimLetter(ctx context.Context, e sqlx.ExecerContext, l dueLetter, now, until time.Time, ttl time.Duration) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, closesql.ClaimLetter, map[string]any{"until": until, "ttl_us": ttl.Microseconds(),
		"id": l.ID, "attempts": l.Attempts, "now": now})
	if err != nil {
		return false, fmt.Errorf("claim dead letter of %s: %w", l.OrderNo, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (store) settleLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) (bool, error) {
	res, err := sqlexec.ExecNamed(ctx, e, closesql.SettleLetter, map[string]any{"status": status, "reason": reason, "id": id})
	if err != nil {
		return false, fmt.Errorf("mark dead letter %d %s: %w", id, status, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (store) noteLetter(ctx context.Context, e sqlx.ExecerContext, id int64, status, reason string) error {
	if _, err := sqlexec.ExecNamed(ctx, e, closesql.NoteLetter, map[string]any{"reason": reason, "id": id, "status": status}); err != nil {
		return fmt.Errorf("note dead letter %d: %w", id, err)
	}
	return nil
}
