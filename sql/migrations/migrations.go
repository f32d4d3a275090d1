// Package migrations holds the executor's schema as numbered SQL files and
// applies them. `executor migrate` and the test helpers use the same files.
//
// Files are NNNN_name.up.sql, applied in number order, each once, recorded
// with its checksum in the executor's own history table
// (order_job_schema_migrations unless configured): never in another tool's
// (golang-migrate and Rails keep a schema_migrations table of their own). A
// step missing from the history runs even when later steps are recorded, so
// files added on two branches at once both run. A file may hold several
// statements separated by a `;` at the end of a line.
//
// Users point the executor at their own, long-lived order tables, so the
// migrator reads each statement (see parse.go) and compares it with the
// live schema before running it:
//
//   - CREATE TABLE IF NOT EXISTS of a table that exists adds the columns and
//     indexes of the definition that are missing, one ALTER each;
//   - ADD COLUMN / ADD INDEX of one that exists is skipped when it is what
//     the step makes, and refused when it is not (a TIMESTAMP where we need a
//     DATETIME, an index of the same name over other columns), naming it and
//     the statement that would fix it; nothing runs while any is refused;
//   - every ALTER runs with ALGORITHM=INSTANT, else ALGORITHM=INPLACE,
//     LOCK=NONE, and stops rather than copy the table unless AllowCopy;
//   - after the steps, every table, column and index the files define is
//     checked (Check), and anything still missing (a table dropped since, a
//     column of an order_info older than the history) is added.
//
// When the shop declares its own order tables (Config.Shop, order.schema),
// the steps that would create or change them are recorded as skipped
// (skipped_for) and never run, and the check verifies the declared tables,
// columns, unique keys and indexes instead (declared.go), naming the DDL a
// DBA would run: a job may not add columns to a shop's order table.
//
// An installation migrated before the history table had its name kept its
// history in schema_migrations (version, name, applied_at); that history is
// carried over once, and only from a table of exactly that shape.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

//go:embed *.up.sql
var files embed.FS

// Migration is one numbered file.
type Migration struct {
	Version int
	Name    string
	// Checksum is the sha256 of the file, hex: a recorded step whose file
	// changed since is reported as drift.
	Checksum   string
	Statements []string

	parsed []statement
}

// ID is the step's file name without the suffix, e.g. 0001_order_info.
func (m Migration) ID() string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

var fileName = regexp.MustCompile(`^[a-z0-9_]{1,100}\.up\.sql$`)

var embedded = sync.OnceValues(func() ([]Migration, error) { return load(files) })

// All returns the embedded migrations in order.
func All() ([]Migration, error) { return embedded() }

// load reads and parses the *.up.sql files of fsys.
func load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.Glob(fsys, "*.up.sql")
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
		if !fileName.MatchString(rest) {
			return nil, fmt.Errorf("migrations: bad file name %s: want NNNN_lower_case_name.up.sql", name)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		m := Migration{Version: v, Name: strings.TrimSuffix(rest, ".up.sql"), Checksum: hex.EncodeToString(sum[:]),
			Statements: split(string(body))}
		for i, s := range m.Statements {
			st, err := parseStatement(s)
			if err != nil {
				return nil, fmt.Errorf("migrations: %s statement %d: %w", name, i+1, err)
			}
			m.parsed = append(m.parsed, st)
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	if _, err := expected(ms); err != nil {
		return nil, err
	}
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

// expected is the schema the steps make on an empty database: what the
// executor relies on.
func expected(ms []Migration) (schema, error) {
	s := schema{}
	for _, m := range ms {
		for i, st := range m.parsed {
			if err := foldStatement(s, st); err != nil {
				return nil, fmt.Errorf("migrations: %s statement %d: %w", m.ID(), i+1, err)
			}
		}
	}
	return s, nil
}

// foldStatement changes s as the statement would on a database where every
// earlier step ran.
func foldStatement(s schema, st statement) error {
	switch st.Kind {
	case stmtCreateTable:
		if s[st.Table] == nil {
			t := st.Create.clone()
			t.Options = st.Options
			s[st.Table] = t
		}
	case stmtAlterTable:
		t := s[st.Table]
		if t == nil {
			return fmt.Errorf("ALTER TABLE %s: no earlier step creates the table", st.Table)
		}
		for _, c := range st.Clauses {
			applyClause(t, c)
		}
	case stmtDropTable:
		delete(s, st.Table)
	case stmtRenameTable:
		if t := s[st.Table]; t != nil {
			delete(s, st.Table)
			t.Name = st.NewName
			s[st.NewName] = t
		}
	}
	return nil
}

// tableNames lists the tables the steps touch, for reading the live schema.
func tableNames(ms []Migration) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for _, st := range m.parsed {
			for _, n := range []string{st.Table, st.NewName} {
				if n != "" && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// MySQL error numbers of a schema that lacks what the executor queries.
const (
	erNoSuchTable = 1146 // ER_NO_SUCH_TABLE
	erBadField    = 1054 // ER_BAD_FIELD_ERROR: unknown column
	erBadDB       = 1049 // ER_BAD_DB_ERROR: unknown database
)

// Explain adds the remedy to an error caused by a missing table or column
// (the database was never migrated, or by an older executor): "run
// `executor migrate`". Other errors, and nil, are returned as they are.
func Explain(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erBadDB {
		return &noDatabaseError{err: err, name: unknownDatabase(me.Message)}
	}
	if !errors.As(err, &me) || (me.Number != erNoSuchTable && me.Number != erBadField) {
		return err
	}
	return &schemaError{err}
}

// noDatabaseError is an error of a DSN naming a database the server does
// not have.
type noDatabaseError struct {
	err  error
	name string
}

func (e *noDatabaseError) Error() string {
	return fmt.Sprintf("database %s does not exist; run `executor migrate -create-database` (or create it) [%v]", e.name, e.err)
}

func (e *noDatabaseError) Unwrap() error { return e.err }

// unknownDatabase is the name in the server's "Unknown database 'x'".
func unknownDatabase(msg string) string {
	if _, rest, ok := strings.Cut(msg, "'"); ok {
		if name, _, ok := strings.Cut(rest, "'"); ok {
			return name
		}
	}
	return "named by mysql.dsn"
}

// schemaError is an error of a database whose schema is missing or behind.
type schemaError struct{ err error }

func (e *schemaError) Error() string {
	return e.err.Error() + " (the schema is missing or older than this executor: run `executor migrate`)"
}

func (e *schemaError) Unwrap() error { return e.err }
