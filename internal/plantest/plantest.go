// Package plantest checks that a statement's plan does not depend on the
// optimizer's statistics. Production order tables have statistics sampled
// early in a bulk load or from a few pages; a statement whose plan follows
// them can turn from a range over an index into a full table scan at any
// time. A test describes each hot statement once (its SQL with real
// arguments, how many orders or tasks it handles, and the index it must use
// on each table), and Check runs it three times: with the statistics as the
// load left them, and after making MariaDB's engine-independent statistics
// lie both ways (every index holds one value: the measured way to make a
// 500-value IN list plan a full scan; every index is unique: any index the
// WHERE names then beats a list of primary keys). Each time it asserts the
// plan (EXPLAIN's key and type per table) and the rows the statement
// actually read (the session's Handler_read_* counters around it): at most
// PerUnit reads per unit handled, 3 by default.
//
// Adding a statement is one entry in a package's table (see orders'
// plans_test.go and delay's): a name, the Query, the units and Uses(...).
//
// The lies are rows in mysql.table_stats and mysql.index_stats for the test
// database's own tables only, removed afterwards; no server variable
// changes.
package plantest

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/internal/statslie"
)

// Query is a statement ready to run: SQL with ? placeholders and their
// arguments.
type Query struct {
	SQL  string
	Args []any
}

// Statement is one hot statement as a test registers it.
type Statement struct {
	// Name says where it runs, e.g. "close: order items".
	Name string
	Query
	// Units is what the statement handles: orders (or letters, tasks,
	// events). The read budget is PerUnit per unit, plus a small constant.
	Units int
	// Plan lists, for every table EXPLAIN shows, the index it must use and
	// the access types allowed. A table EXPLAIN shows that is not listed
	// fails the check, so a new join is noticed.
	Plan []Access
	// PerUnit is the most handler reads per unit. 0 means 3.
	PerUnit float64
	// Slack is added to the budget (the first positioning of each range,
	// a cursor's boundary rows). 0 means 10.
	Slack int
}

// Access is how one table of a plan must be read.
type Access struct {
	Table string   // EXPLAIN's table column (the alias, if the SQL gives one)
	Key   string   // the index: "PRIMARY", "idx_order_no", ...
	Types []string // allowed access types, e.g. range, ref, eq_ref, const
}

// Uses is a plan of one table: Uses("order_item", "idx_order_no", "range").
// More tables: Uses("o", "uk_order_no", "range").And("d", "uk_order_stage",
// "eq_ref").
func Uses(table, key string, types ...string) Plan {
	return Plan{{Table: table, Key: key, Types: types}}
}

// PK is a read of table by its primary key: a range of ids, one id, or a
// join on it.
func PK(table string) Plan { return Uses(table, "PRIMARY", "range", "const", "eq_ref") }

// ByKey is a read of table through key, unique or not: a range, one value,
// or a join on it.
func ByKey(table, key string) Plan { return Uses(table, key, "range", "const", "ref", "eq_ref") }

// Plan is a list of accesses built with Uses.
type Plan []Access

// And adds another table's access.
func (p Plan) And(table, key string, types ...string) Plan {
	return append(p, Access{Table: table, Key: key, Types: types})
}

// In expands query's IN (?) lists with sqlx.In, for Statement.Query.
func In(t testing.TB, query string, args ...any) Query {
	t.Helper()
	q, a, err := sqlx.In(query, args...)
	if err != nil {
		t.Fatalf("plantest: expand %q: %v", query, err)
	}
	return Query{SQL: q, Args: a}
}

// Named binds query's :name parameters from arg (a params struct with db
// tags, or a map) and expands the lists among them, as the statement's
// caller does (sqlexec.Named), for Statement.Query.
func Named(t testing.TB, query string, arg any) Query {
	t.Helper()
	q, a, err := sqlexec.Named(query, arg)
	if err != nil {
		t.Fatalf("plantest: bind %q: %v", query, err)
	}
	return Query{SQL: q, Args: a}
}

// Q is a Query without lists to expand.
func Q(query string, args ...any) Query { return Query{SQL: query, Args: args} }

// Lit is Q for a query whose %s takes ids as a literal list
// (sqlexec.IntList), as the statement's caller renders it.
func Lit(query string, ids []int64, args ...any) Query {
	return Q(fmt.Sprintf(query, sqlexec.IntList(ids)), args...)
}

// Result is what one Check run saw.
type Result struct {
	Plan  []PlanRow
	Reads int // handler reads the statement made
}

// PlanRow is one EXPLAIN row.
type PlanRow struct {
	SelectType, Table, Type, Key, Rows, Extra string
}

func (r PlanRow) String() string {
	return fmt.Sprintf("table=%s type=%s key=%s rows=%s extra=%q", r.Table, r.Type, r.Key, r.Rows, r.Extra)
}

// Check runs every statement on db three times: with the statistics as
// InnoDB last sampled them, after Lie has made every index of tables look
// useless (one value: the optimizer then prefers table scans), and after it
// has made every index look unique (each value one row: the optimizer then
// prefers any index that the WHERE mentions, even over a primary-key list).
// Each run is a subtest named "<statistics>/<Name>"; one fails when its plan
// is not the statement's Plan or it read more rows than its budget. Each
// statement runs in a READ COMMITTED transaction that is rolled back, so
// writes leave no trace and every statement sees the same rows.
func Check(t *testing.T, db *sqlx.DB, tables []string, stmts []Statement) {
	t.Helper()
	for _, lie := range append([]statslie.Lie{0}, Lies...) {
		name, undo := "as loaded", func() {}
		if lie != 0 {
			name, undo = "lying: "+lie.String(), Lie(t, db, lie, tables...)
		}
		t.Run(name, func(t *testing.T) {
			for _, s := range stmts {
				t.Run(s.Name, func(t *testing.T) {
					r, err := Run(context.Background(), db, s.Query)
					if err != nil {
						t.Fatalf("%v\nSQL: %s", err, short(s.SQL))
					}
					if msg := Judge(s, r); msg != "" {
						t.Errorf("%s\nSQL: %s", msg, short(s.SQL))
						return
					}
					t.Logf("%d reads for %d units; %v", r.Reads, s.Units, r.Plan)
				})
			}
		})
		undo()
	}
}

// Judge returns why r breaks s's plan or budget, or "".
func Judge(s Statement, r Result) string {
	var bad []string
	seen := map[string]bool{}
	for _, row := range r.Plan {
		if row.Table == "" || row.SelectType == "INSERT" {
			continue // "No tables used"; the row an INSERT writes into
		}
		seen[row.Table] = true
		i := slices.IndexFunc(s.Plan, func(a Access) bool { return a.Table == row.Table })
		if i < 0 {
			bad = append(bad, fmt.Sprintf("plan reads table %s, which the entry does not list (%v)", row.Table, row))
			continue
		}
		a := s.Plan[i]
		if row.Key != a.Key || !slices.Contains(a.Types, row.Type) {
			bad = append(bad, fmt.Sprintf("want %s via %s (%s), got %v", a.Table, a.Key, strings.Join(a.Types, "|"), row))
		}
	}
	for _, a := range s.Plan {
		if !seen[a.Table] {
			bad = append(bad, fmt.Sprintf("plan does not read %s: %v", a.Table, r.Plan))
		}
	}
	per := s.PerUnit
	if per == 0 {
		per = 3
	}
	slack := s.Slack
	if slack == 0 {
		slack = 10
	}
	if budget := int(per*float64(s.Units)) + slack; r.Reads > budget {
		bad = append(bad, fmt.Sprintf("read %d rows for %d units (budget %d: %.1f per unit + %d); plan %v",
			r.Reads, s.Units, budget, per, slack, r.Plan))
	}
	return strings.Join(bad, "; ")
}

// Run explains and runs q on one connection of db, inside a READ COMMITTED
// transaction that is rolled back, and returns the plan and the handler
// reads the statement made.
func Run(ctx context.Context, db *sqlx.DB, q Query) (Result, error) {
	var r Result
	conn, err := db.Connx(ctx)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	if r.Plan, err = explain(ctx, conn, q); err != nil {
		return r, fmt.Errorf("explain: %w", err)
	}
	tx, err := conn.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return r, err
	}
	defer func() { _ = tx.Rollback() }()
	// What reading the counters costs by itself, measured the same way.
	c0, err := reads(ctx, tx)
	if err != nil {
		return r, err
	}
	c1, err := reads(ctx, tx)
	if err != nil {
		return r, err
	}
	rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return r, err
	}
	defer rows.Close() // closed below before the counters are read again; a second Close is a no-op
	for rows.Next() {
	}
	if err := rows.Close(); err != nil {
		return r, err
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	c2, err := reads(ctx, tx)
	if err != nil {
		return r, err
	}
	r.Reads = (c2 - c1) - (c1 - c0)
	return r, nil
}

// readCounters are the handler calls that read a row or an index entry.
var readCounters = []string{"Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next",
	"Handler_read_prev", "Handler_read_rnd", "Handler_read_rnd_next"}

func reads(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	rows, err := q.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		var v sql.NullInt64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, err
		}
		if slices.Contains(readCounters, name) {
			n += int(v.Int64)
		}
	}
	return n, rows.Err()
}

func explain(ctx context.Context, q sqlx.QueryerContext, query Query) ([]PlanRow, error) {
	rows, err := q.QueryxContext(ctx, "EXPLAIN "+query.SQL, query.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PlanRow
	for rows.Next() {
		m := map[string]any{}
		if err := rows.MapScan(m); err != nil {
			return nil, err
		}
		out = append(out, PlanRow{SelectType: str(m["select_type"]), Table: str(m["table"]), Type: str(m["type"]), Key: str(m["key"]),
			Rows: str(m["rows"]), Extra: str(m["Extra"])})
	}
	return out, rows.Err()
}

func str(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// Lies Check runs the statements under, besides the statistics as loaded.
var Lies = []statslie.Lie{statslie.OneValue, statslie.Unique}

// Lie makes the statistics of tables of db's current database lie (see
// package statslie) until the returned func, also registered with
// t.Cleanup, removes the lie.
func Lie(t testing.TB, db *sqlx.DB, l statslie.Lie, tables ...string) (undo func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	truth, err := statslie.Tell(ctx, db, l, tables...)
	done := false
	undo = func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := truth(ctx); err != nil {
			t.Errorf("plantest: %v", err)
		}
	}
	t.Cleanup(undo)
	if err != nil {
		t.Fatalf("plantest: %v", err)
	}
	return undo
}
