package migrations

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// column is a column as our files define it or as the server reports it.
type column struct {
	Name     string // lower case
	Def      string // our definition after the name, without a position; empty for a live column
	Type     string // normalized COLUMN_TYPE: "bigint", "varchar(64)", "datetime(3)", "decimal(12,2)"
	Nullable bool
}

// index is an index; the primary key is named "primary".
type index struct {
	Name    string   // lower case
	Columns []string // lower case, in index order
	Unique  bool
}

// sql renders the index as an ADD clause's body or a CREATE TABLE line.
func (i index) sql() string {
	cols := strings.Join(i.Columns, ", ")
	switch {
	case i.Name == "primary":
		return "PRIMARY KEY (" + cols + ")"
	case i.Unique:
		return "UNIQUE KEY " + i.Name + " (" + cols + ")"
	default:
		return "KEY " + i.Name + " (" + cols + ")"
	}
}

// table is a table's columns and indexes.
type table struct {
	Name    string // lower case
	Columns []column
	Indexes []index
	Options string // ours: the table options of its CREATE TABLE
	Engine  string // live: the storage engine SHOW CREATE TABLE names
}

func (t *table) column(name string) *column {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i]
		}
	}
	return nil
}

func (t *table) index(name string) *index {
	for i := range t.Indexes {
		if t.Indexes[i].Name == name {
			return &t.Indexes[i]
		}
	}
	return nil
}

func (t *table) clone() *table {
	c := *t
	c.Columns = slices.Clone(t.Columns)
	c.Indexes = make([]index, len(t.Indexes))
	for i, ix := range t.Indexes {
		ix.Columns = slices.Clone(ix.Columns)
		c.Indexes[i] = ix
	}
	return &c
}

// createSQL renders the table as a CREATE TABLE statement, for a table the
// executor needs that is missing although its steps are recorded.
func (t *table) createSQL() string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + t.Name + " (\n")
	lines := make([]string, 0, len(t.Columns)+len(t.Indexes))
	for _, c := range t.Columns {
		lines = append(lines, "    "+c.Name+" "+c.Def)
	}
	for _, ix := range t.Indexes {
		lines = append(lines, "    "+ix.sql())
	}
	b.WriteString(strings.Join(lines, ",\n"))
	b.WriteString("\n)")
	if t.Options != "" {
		b.WriteString(" " + t.Options)
	}
	return b.String()
}

// schema is a set of tables by lower-case name.
type schema map[string]*table

func (s schema) clone() schema {
	c := make(schema, len(s))
	for k, t := range s {
		c[k] = t.clone()
	}
	return c
}

var intWidth = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)`)

// normalizeType lower-cases a column type and drops integer display widths
// (MariaDB reports bigint(20) for BIGINT), so ours and the server's compare.
func normalizeType(t string) string {
	t = strings.ToLower(strings.Join(strings.Fields(t), " "))
	t = intWidth.ReplaceAllString(t, "$1")
	t = strings.ReplaceAll(t, ", ", ",")
	if strings.HasPrefix(t, "integer") {
		t = "int" + strings.TrimPrefix(t, "integer")
	}
	// The live schema is read without COLUMN_TYPE (see store.go), so
	// signedness is not compared: it never changes what the executor can do.
	t = strings.TrimSuffix(strings.TrimSuffix(t, " zerofill"), " unsigned")
	return t
}

// baseType is a column type without its width, values or attributes:
// "int" of "int(11) unsigned", "enum" of "enum('a','b')".
func baseType(t string) string {
	if i := strings.IndexAny(t, "( "); i >= 0 {
		return t[:i]
	}
	return t
}

// family groups types the executor can use interchangeably: an INT id where
// we write BIGINT, a VARCHAR(32) order_no where we write VARCHAR(64).
func family(t string) string {
	base := baseType(t)
	switch base {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "bool", "boolean":
		return "integer"
	case "decimal", "numeric", "dec", "fixed":
		return "decimal"
	case "float", "double", "real":
		return "float"
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return "string"
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return "binary"
	}
	return base // datetime, timestamp, date, time, json, enum, ...
}

// Problem is something in the database the executor cannot work with, or
// that is missing.
type Problem struct {
	Table  string `json:"table"`
	Object string `json:"object"` // "column create_time", "index uk_order_no", "table order_close_log"
	Detail string `json:"detail"`
	// Fix is the statement that would repair it, or "run executor migrate"
	// for what the migrator adds itself.
	Fix string `json:"fix"`
	// Missing is true when the migrator adds the object itself; false when an
	// existing one is in the way and needs the operator.
	Missing bool `json:"missing"`
	// Source is "order.schema" for a problem of the shop's declared tables
	// (the executor never changes them: the fix is the DBA's or the
	// setting's), "" for the executor's own.
	Source string `json:"source,omitempty"`
}

// String names the object as table.name ("column order_info.coupon_id is
// missing: run executor migrate").
func (p Problem) String() string {
	obj := p.Object
	switch kind, name, _ := strings.Cut(p.Object, " "); kind {
	case "column", "index":
		obj = kind + " " + p.Table + "." + name
	case "table":
	default: // "primary key", "unique key over order_sn"
		obj += " of " + p.Table
	}
	if p.Missing {
		return obj + " " + p.Detail + ": " + p.Fix
	}
	return fmt.Sprintf("%s %s; fix: %s", obj, p.Detail, p.Fix)
}

const runMigrate = "run executor migrate"

// checkColumn compares an existing column with ours.
func checkColumn(tbl string, want column, have column) *Problem {
	if family(want.Type) == family(have.Type) {
		return nil
	}
	p := &Problem{Table: tbl, Object: "column " + want.Name,
		Detail: fmt.Sprintf("is %s; the executor needs %s", strings.ToUpper(have.Type), strings.ToUpper(want.Type)),
		Fix:    fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN %s %s", tbl, want.Name, want.Def)}
	if family(want.Type) == "datetime" && family(have.Type) == "timestamp" {
		p.Detail += " (a TIMESTAMP is converted through the session time zone on every read and write, " +
			"so the executor's zone-less comparison with NOW() would change meaning with the zone; " +
			"the MODIFY converts the stored values from the session time zone it runs in, and copies the table)"
	}
	return p
}

// checkIndex compares an existing index with ours (matched by name: the
// executor names the indexes it forces).
func checkIndex(tbl string, want index, have index) *Problem {
	if slices.Equal(want.Columns, have.Columns) && (have.Unique || !want.Unique) {
		return nil
	}
	what := "is over (" + strings.Join(have.Columns, ", ") + ")"
	if slices.Equal(want.Columns, have.Columns) {
		what = "is not unique"
	}
	return &Problem{Table: tbl, Object: "index " + want.Name,
		Detail: fmt.Sprintf("%s; the executor needs %s", what, want.sql()),
		Fix: fmt.Sprintf("ALTER TABLE %s DROP INDEX %s, ADD %s (or rename yours: ALTER TABLE %[1]s RENAME INDEX %[2]s TO %[2]s_old)",
			tbl, want.Name, want.sql())}
}

// primarySatisfied reports whether the table's primary key, or a unique
// index over the same columns, gives what our primary key gives: one row
// per key value.
func primarySatisfied(want index, have *table) bool {
	for _, ix := range have.Indexes {
		if ix.Unique && slices.Equal(ix.Columns, want.Columns) {
			return true
		}
	}
	return false
}

// reconcile compares an existing table with the definition the executor
// needs. It returns the ALTER clauses that add what is missing (one per
// column or index: an added column is instant, an index is built in place,
// and one ALTER holding both would rebuild the table) and the problems that
// block the executor.
func reconcile(want, have *table) ([]clause, []Problem) {
	var adds []clause
	var probs []Problem
	for _, c := range want.Columns {
		h := have.column(c.Name)
		if h == nil {
			adds = append(adds, clause{Kind: addColumn, Column: c, SQL: "ADD COLUMN " + c.Name + " " + c.Def})
			continue
		}
		if p := checkColumn(want.Name, c, *h); p != nil {
			probs = append(probs, *p)
		}
	}
	for _, ix := range want.Indexes {
		if ix.Name == "primary" {
			if !primarySatisfied(ix, have) {
				probs = append(probs, Problem{Table: want.Name, Object: "primary key",
					Detail: fmt.Sprintf("has no unique index over (%s); the executor reads one row per key", strings.Join(ix.Columns, ", ")),
					Fix:    fmt.Sprintf("ALTER TABLE %s ADD UNIQUE KEY uk_%s (%s)", want.Name, strings.Join(ix.Columns, "_"), strings.Join(ix.Columns, ", "))})
			}
			continue
		}
		h := have.index(ix.Name)
		if h == nil {
			c := clause{Kind: addIndex, Index: ix, SQL: "ADD " + ix.sql()}
			if twin := equivalentIndex(ix, have); twin != "" {
				c.Note = fmt.Sprintf("%s already has %s over (%s), but the executor's queries name %s, so it adds its own; "+
					"to avoid keeping both, stop and run ALTER TABLE %[1]s RENAME INDEX %[2]s TO %[4]s first",
					want.Name, twin, strings.Join(ix.Columns, ", "), ix.Name)
			}
			adds = append(adds, c)
			continue
		}
		if p := checkIndex(want.Name, ix, *h); p != nil {
			probs = append(probs, *p)
		}
	}
	return adds, probs
}

// equivalentIndex names an index of have, under another name, that serves
// what ix serves.
func equivalentIndex(ix index, have *table) string {
	for _, h := range have.Indexes {
		if h.Name != "primary" && slices.Equal(h.Columns, ix.Columns) && (h.Unique || !ix.Unique) {
			return h.Name
		}
	}
	return ""
}

// applyClause changes t as the clause would.
func applyClause(t *table, c clause) {
	switch c.Kind {
	case addColumn:
		if t.column(c.Column.Name) == nil {
			t.Columns = append(t.Columns, c.Column)
		}
	case addIndex:
		if t.index(c.Index.Name) == nil {
			t.Indexes = append(t.Indexes, c.Index)
		}
	case dropIndex:
		t.Indexes = slices.DeleteFunc(t.Indexes, func(ix index) bool { return ix.Name == c.Name })
	}
}

// clauseDone reports whether the clause's effect is already in t (so it is
// left out of the ALTER), or, for an existing column or index of the same
// name that is not what the clause makes, the problem.
func clauseDone(tbl string, t *table, c clause) (bool, *Problem) {
	switch c.Kind {
	case addColumn:
		if h := t.column(c.Column.Name); h != nil {
			return true, checkColumn(tbl, c.Column, *h)
		}
	case addIndex:
		if c.Index.Name == "primary" {
			// A key the same ALTER dropped is always added back.
			return t.index("primary") != nil && primarySatisfied(c.Index, t), nil
		}
		if h := t.index(c.Index.Name); h != nil {
			return true, checkIndex(tbl, c.Index, *h)
		}
	case dropIndex:
		if c.Replace != nil { // DROP PRIMARY KEY: done once the new key is in
			return primarySatisfied(*c.Replace, t), nil
		}
		return t.index(c.Name) == nil, nil
	}
	return false, nil
}
