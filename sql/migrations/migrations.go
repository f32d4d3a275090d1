// Package migrations holds the executor's schema as numbered SQL files and
// applies them. `executor migrate` and the test helpers use the same files.
//
// Files are NNNN_name.up.sql, applied in number order, each once, recorded in
// schema_migrations. A file may hold several statements separated by a `;`
// at the end of a line. MySQL cannot roll DDL back, so files stay small.
//
// Applying is idempotent on databases that already have the tables (users
// point the executor at their own order_info): "already exists" errors for a
// table, column or index are taken as "this step is done", which works on
// MySQL 8 and MariaDB alike (MySQL 8 has no ADD COLUMN IF NOT EXISTS).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

//go:embed *.up.sql
var files embed.FS

// Migration is one numbered file.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// All returns the embedded migrations in order.
func All() ([]Migration, error) {
	entries, err := fs.Glob(files, "*.up.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range entries {
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migrations: bad file name %s", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations: %s and %s share version %d", other, name, v)
		}
		seen[v] = name
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(rest, ".up.sql"), Statements: split(string(body))})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// split cuts a file into statements at semicolons that end a line, dropping
// comment-only and blank lines.
func split(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			if s := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"); s != "" {
				out = append(out, s)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

const (
	createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INT          NOT NULL,
    name       VARCHAR(128) NOT NULL,
    applied_at DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (version)
) ENGINE=InnoDB`
	// A named lock serialises executors migrating at once (several replicas
	// starting together); it is released by RELEASE_LOCK or by the session end.
	getLock     = `SELECT GET_LOCK('executor_schema_migrations', 60)`
	releaseLock = `SELECT RELEASE_LOCK('executor_schema_migrations')`
	applied     = `SELECT version FROM schema_migrations`
	record      = `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`
)

// MySQL error numbers that mean a step was already done.
var alreadyDone = map[uint16]bool{
	1050: true, // table already exists
	1060: true, // duplicate column name
	1061: true, // duplicate key name
	1826: true, // duplicate foreign key constraint name
}

// Apply brings the database up to date and returns the versions it applied.
func Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()

	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, getLock).Scan(&got); err != nil {
		return nil, fmt.Errorf("migrations: take lock: %w", err)
	}
	if got.Int64 != 1 {
		return nil, errors.New("migrations: another process held the migration lock for 60s")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), releaseLock) //nolint:errcheck // session end releases it too

	if _, err := conn.ExecContext(ctx, createTable); err != nil {
		return nil, fmt.Errorf("migrations: create schema_migrations: %w", err)
	}
	done := map[int]bool{}
	rows, err := conn.QueryContext(ctx, applied)
	if err != nil {
		return nil, fmt.Errorf("migrations: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		done[v] = true
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}

	var did []int
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		for i, stmt := range m.Statements {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				var me *mysql.MySQLError
				if errors.As(err, &me) && alreadyDone[me.Number] {
					continue
				}
				return did, fmt.Errorf("migrations: %04d_%s statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		if _, err := conn.ExecContext(ctx, record, m.Version, m.Name); err != nil {
			return did, fmt.Errorf("migrations: record %04d: %w", m.Version, err)
		}
		did = append(did, m.Version)
	}
	return did, nil
}

// MySQL error numbers of a schema that lacks what the executor queries.
const (
	erNoSuchTable = 1146 // ER_NO_SUCH_TABLE
	erBadField    = 1054 // ER_BAD_FIELD_ERROR: unknown column
)

// Explain adds the remedy to an error caused by a missing table or column
// (the database was never migrated, or by an older executor): "run
// `executor migrate`". Other errors, and nil, are returned as they are.
func Explain(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || (me.Number != erNoSuchTable && me.Number != erBadField) {
		return err
	}
	return &schemaError{err}
}

// schemaError is an error of a database whose schema is missing or behind.
type schemaError struct{ err error }

func (e *schemaError) Error() string {
	return e.err.Error() + " (the schema is missing or older than this executor: run `executor migrate`)"
}

func (e *schemaError) Unwrap() error { return e.err }
