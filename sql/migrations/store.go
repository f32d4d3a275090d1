package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// This file holds the migrator's own SQL: reading the live schema, the
// history table and the migration lock. The steps' SQL is in the files.
// Table names come from the configuration and are checked against
// identPattern before they reach a statement.

// querier is what the reads need: a *sql.DB or the migrator's *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// execer runs statements.
type execer interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// showCreateSQL reads one table's definition (%s: a name from the steps or
// the configuration, [a-z0-9_]). The live schema is read table by table
// this way rather than from information_schema: no temporary table, no scan
// of a database that may hold thousands of tables, and exactly the types
// and index definitions the server keeps. (MariaDB materialises every
// information_schema.COLUMNS query in an on-disk Aria temporary table, and
// 10.11 once crashed freeing one under a load of parallel DDL.)
const showCreateSQL = "SHOW CREATE TABLE `%s`"

// readSchema reads the named tables as the server has them; missing tables
// (and views) are absent from the result.
func readSchema(ctx context.Context, q querier, names []string) (schema, error) {
	s := schema{}
	for _, name := range names {
		create, err := showCreate(ctx, q, name)
		if err != nil {
			return nil, fmt.Errorf("read table %s: %w", name, err)
		}
		if create == "" {
			continue
		}
		t, err := parseLiveTable(create)
		if err != nil {
			return nil, fmt.Errorf("read table %s: %w", name, err)
		}
		t.Name = strings.ToLower(name)
		s[t.Name] = t
	}
	return s, nil
}

// showCreate returns the table's CREATE TABLE, or "" when there is no base
// table of that name.
func showCreate(ctx context.Context, q querier, name string) (string, error) {
	rows, err := q.QueryContext(ctx, fmt.Sprintf(showCreateSQL, name))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 { // no such table
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if len(cols) != 2 || !rows.Next() { // a view answers with four columns
		return "", rows.Err()
	}
	var tbl, create string
	if err := rows.Scan(&tbl, &create); err != nil {
		return "", err
	}
	return create, rows.Close()
}

func eachRow(ctx context.Context, q querier, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

const (
	// createHistorySQL: %s is the history table. applied_at is UTC.
	// carried_from names the table a step's record was copied from when an
	// installation's older history was carried over; NULL when it ran here.
	// skipped_for names the setting a step was recorded for without running
	// (order.schema: the step changes the shop's tables, which the operator
	// declared); NULL when it ran.
	createHistorySQL = `CREATE TABLE IF NOT EXISTS %s (
    version      INT          NOT NULL,
    name         VARCHAR(128) NOT NULL,
    checksum     CHAR(64)     CHARACTER SET ascii NOT NULL COMMENT 'sha256 of the step file',
    applied_at   DATETIME(3)  NOT NULL COMMENT 'UTC',
    execution_ms BIGINT       NOT NULL DEFAULT 0,
    carried_from VARCHAR(64)  NULL,
    skipped_for  VARCHAR(64)  NULL COMMENT 'the setting the step was skipped for: order.schema',
    PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
	// readHistorySQL: %s is the history table. All rows, in version order.
	readHistorySQL = `SELECT version, name, checksum, applied_at, execution_ms, COALESCE(carried_from, ''), %s FROM %s ORDER BY version`
	// skippedColumn is readHistorySQL's last column on a history table
	// with skipped_for; older ones (made before it) read noSkippedColumn.
	skippedColumn   = `COALESCE(skipped_for, '')`
	noSkippedColumn = `''`
	// addSkippedSQL gives an older history table (%s) its skipped_for
	// column, before the first step is recorded as skipped. A nullable
	// column: instant, and older executors never read it.
	addSkippedSQL = `ALTER TABLE %s ADD COLUMN skipped_for VARCHAR(64) NULL COMMENT 'the setting the step was skipped for: order.schema'`
	// recordSkippedSQL: %s is the history table; params: version, name,
	// checksum, skipped_for. The step did not run: execution_ms is 0.
	recordSkippedSQL = `INSERT INTO %s (version, name, checksum, applied_at, execution_ms, skipped_for) VALUES (?, ?, ?, UTC_TIMESTAMP(3), 0, ?)`
	// recordRanSQL: %s is the history table; params: checksum,
	// execution_ms, version. A skipped step that has now run (migrate
	// -run-skipped) keeps its row, no longer marked skipped.
	recordRanSQL = `UPDATE %s SET checksum = ?, applied_at = UTC_TIMESTAMP(3), execution_ms = ?, skipped_for = NULL WHERE version = ?`
	// recordSQL: %s is the history table; params: version, name, checksum,
	// execution_ms, carried_from (NULL when the step ran here). The primary
	// key makes a second record of a step fail loudly.
	recordSQL = `INSERT INTO %s (version, name, checksum, applied_at, execution_ms, carried_from) VALUES (?, ?, ?, UTC_TIMESTAMP(3), ?, ?)`
	// readLegacySQL: %s is the old history table (version, name,
	// applied_at). All rows.
	readLegacySQL = `SELECT version, name FROM %s`
)

// historyRow is one recorded step.
type historyRow struct {
	Version     int
	Name        string
	Checksum    string
	AppliedAt   time.Time
	ExecutionMS int64
	CarriedFrom string
	SkippedFor  string // the setting the step was skipped for; "" when it ran
}

// readHistory reads the history table; hasSkipped says whether it has the
// skipped_for column.
func readHistory(ctx context.Context, q querier, tbl string, hasSkipped bool) ([]historyRow, error) {
	var out []historyRow
	skipped := noSkippedColumn
	if hasSkipped {
		skipped = skippedColumn
	}
	err := eachRow(ctx, q, fmt.Sprintf(readHistorySQL, skipped, tbl), nil, func(r *sql.Rows) error {
		var h historyRow
		var at any // time.Time with parseTime=true in the DSN, bytes without
		if err := r.Scan(&h.Version, &h.Name, &h.Checksum, &at, &h.ExecutionMS, &h.CarriedFrom, &h.SkippedFor); err != nil {
			return err
		}
		switch v := at.(type) {
		case time.Time:
			h.AppliedAt = v
		case []byte:
			h.AppliedAt, _ = time.Parse("2006-01-02 15:04:05.999", string(v))
		}
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", tbl, err)
	}
	return out, nil
}

func record(ctx context.Context, e execer, tbl string, s Migration, took time.Duration, carriedFrom string) error {
	var from any
	if carriedFrom != "" {
		from = carriedFrom
	}
	if _, err := e.ExecContext(ctx, fmt.Sprintf(recordSQL, tbl), s.Version, s.Name, s.Checksum, took.Milliseconds(), from); err != nil {
		return fmt.Errorf("record %04d_%s in %s: %w", s.Version, s.Name, tbl, err)
	}
	return nil
}

// recordSkipped records s as skipped for the named setting.
func recordSkipped(ctx context.Context, e execer, tbl string, s Migration, skippedFor string) error {
	if _, err := e.ExecContext(ctx, fmt.Sprintf(recordSkippedSQL, tbl), s.Version, s.Name, s.Checksum, skippedFor); err != nil {
		return fmt.Errorf("record %04d_%s in %s as skipped: %w", s.Version, s.Name, tbl, err)
	}
	return nil
}

// recordRan marks a step recorded as skipped as run.
func recordRan(ctx context.Context, e execer, tbl string, s Migration, took time.Duration) error {
	if _, err := e.ExecContext(ctx, fmt.Sprintf(recordRanSQL, tbl), s.Checksum, took.Milliseconds(), s.Version); err != nil {
		return fmt.Errorf("record %04d_%s in %s as run: %w", s.Version, s.Name, tbl, err)
	}
	return nil
}

func readLegacy(ctx context.Context, q querier, tbl string) (map[int]string, error) {
	out := map[int]string{}
	err := eachRow(ctx, q, fmt.Sprintf(readLegacySQL, tbl), nil, func(r *sql.Rows) error {
		var v int
		var name string
		if err := r.Scan(&v, &name); err != nil {
			return err
		}
		out[v] = name
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", tbl, err)
	}
	return out, nil
}

const (
	// getLockSQL takes the migration lock of this database and history
	// table; params: history table, seconds to wait. A named lock is
	// server-wide, so the name carries the database (hashed: lock names are
	// at most 64 characters). Released by releaseLockSQL or the session's end.
	getLockSQL     = `SELECT GET_LOCK(CONCAT('order_job_migrate:', MD5(CONCAT(DATABASE(), '.', ?))), ?)`
	releaseLockSQL = `SELECT RELEASE_LOCK(CONCAT('order_job_migrate:', MD5(CONCAT(DATABASE(), '.', ?))))`
	// lockWaitSQL bounds how long a DDL statement waits for the metadata
	// lock of its table. An ALTER queued behind a long transaction makes every
	// later query on that table queue behind it, which stops the shop; better
	// to give up and say so. Param: seconds.
	lockWaitSQL = `SET SESSION lock_wait_timeout = ?`
)

func takeLock(ctx context.Context, c execer, tbl string, wait time.Duration) error {
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, getLockSQL, tbl, int(wait.Seconds())).Scan(&got); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if !got.Valid {
		// GET_LOCK answers NULL for a NULL name: DATABASE() is NULL when the
		// DSN names no database, which every step's statement would need.
		var name sql.NullString
		if err := c.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err == nil && !name.Valid {
			return errors.New("the DSN names no database: end it with the database's name (user:pass@tcp(host:port)/shop)")
		}
		return errors.New("take the migration lock: GET_LOCK answered NULL")
	}
	if got.Int64 != 1 {
		return errors.New("another executor migrate held the migration lock of this database for " + wait.String())
	}
	return nil
}

func releaseLock(ctx context.Context, c execer, tbl string) {
	_, _ = c.ExecContext(ctx, releaseLockSQL, tbl) // the session's end releases it too
}

// createDatabaseSQL creates the database (%s, a checked identifier) when
// it is missing, in the character set the steps' tables use.
const createDatabaseSQL = "CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4"

// CreateDatabase creates database name on the server db is connected to
// (db needs no database of its own) when it does not exist yet.
func CreateDatabase(ctx context.Context, db *sql.DB, name string) error {
	create, err := createDatabaseStatement(name)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("migrations: create database %s: %w", name, err)
	}
	return nil
}

// createDatabaseStatement is the CREATE DATABASE of name, a checked
// identifier.
func createDatabaseStatement(name string) (string, error) {
	if !identPattern.MatchString(name) {
		return "", fmt.Errorf("migrations: database name %q: want letters, digits and _ (at most 64)", name)
	}
	return fmt.Sprintf(createDatabaseSQL, name), nil
}

// DatabaseExists reports whether the server db is connected to has a
// database called name.
func DatabaseExists(ctx context.Context, db *sql.DB, name string) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
		return false, fmt.Errorf("migrations: does database %s exist: %w", name, err)
	}
	return n > 0, nil
}
