package migrations

import (
	"fmt"
	"strings"
)

// The migrator reads its own statements instead of running them blindly: it
// must know which table, column or index each one creates, so that on a
// user's existing order_info it adds only what is missing, refuses what is
// incompatible, and can tell afterwards whether the schema is complete. The
// grammar understood is exactly what the files use: CREATE TABLE IF NOT
// EXISTS, ALTER TABLE with ADD COLUMN, ADD [UNIQUE] KEY|INDEX and DROP
// INDEX, CREATE [UNIQUE] INDEX, and UPDATE. Anything else is refused when
// the files are loaded, so a test catches it before a user's database does;
// a file that needs more grows the grammar with it (and FuzzParseStatement
// with the file).

// stmtKind is what a statement does to the schema.
type stmtKind int

const (
	stmtCreateTable stmtKind = iota // CREATE TABLE IF NOT EXISTS t (...)
	stmtAlterTable                  // ALTER TABLE t clause, ... (also CREATE INDEX)
	stmtData                        // UPDATE t ...: no schema change
)

// statement is one parsed statement of a migration file.
type statement struct {
	SQL     string // as written, without the trailing ';'
	Kind    stmtKind
	Table   string   // the table it acts on (lower case)
	Create  *table   // the definition, for CREATE TABLE
	Clauses []clause // for ALTER TABLE
	Options string   // table options after the definition, for CREATE TABLE
}

// clauseKind is one ALTER TABLE clause.
type clauseKind int

const (
	addColumn clauseKind = iota
	addIndex
	dropIndex
)

// clause is one clause of an ALTER TABLE.
type clause struct {
	SQL    string // as written
	Kind   clauseKind
	Column column // addColumn
	Index  index  // addIndex
	Name   string // dropIndex (lower case; "primary" for DROP PRIMARY KEY)
	// Replace is the primary key a DROP PRIMARY KEY makes way for: the
	// ADD PRIMARY KEY of the same ALTER, which the drop must come with.
	Replace *index
	Note    string // planned adds: a remark for the operator
}

// parseStatement parses one statement of a migration file; every statement
// it accepts names its table, which planning relies on.
func parseStatement(sql string) (statement, error) {
	st, err := parseKind(sql)
	if err == nil && st.Table == "" {
		return st, fmt.Errorf("no table name: %.60s", sql)
	}
	return st, err
}

// parseKind parses a statement by its leading keywords.
func parseKind(sql string) (statement, error) {
	toks := tokenize(sql)
	st := statement{SQL: sql}
	kw := func(i int) string { return wordAt(toks, i) }
	switch {
	case kw(0) == "CREATE" && kw(1) == "TABLE":
		return parseCreateTable(sql, toks)
	case kw(0) == "ALTER" && kw(1) == "TABLE":
		if len(toks) < 4 {
			return st, fmt.Errorf("ALTER TABLE without a clause")
		}
		st.Kind = stmtAlterTable
		st.Table = identLower(toks[2])
		rest := sql[toks[3].pos:]
		for _, part := range splitTop(rest) {
			c, err := parseClause(part)
			if err != nil {
				return st, err
			}
			st.Clauses = append(st.Clauses, c)
		}
		if len(st.Clauses) == 0 { // only separators after the name
			return st, fmt.Errorf("ALTER TABLE without a clause")
		}
		return st, pairPrimary(st)
	case kw(0) == "CREATE" && (kw(1) == "INDEX" || (kw(1) == "UNIQUE" && kw(2) == "INDEX")):
		// CREATE [UNIQUE] INDEX name ON t (cols): the same as ALTER TABLE t ADD INDEX.
		i := 2
		unique := kw(1) == "UNIQUE"
		if unique {
			i = 3
		}
		if kw(i+1) != "ON" || i+3 >= len(toks) || toks[i+2].kind != tokWord || toks[i+3].kind != tokGroup {
			return st, fmt.Errorf("CREATE INDEX: want CREATE [UNIQUE] INDEX name ON table (columns)")
		}
		st.Kind = stmtAlterTable
		st.Table = identLower(toks[i+2])
		idx := index{Name: identLower(toks[i]), Columns: indexColumns(toks[i+3].text), Unique: unique}
		cl := clause{Kind: addIndex, Index: idx, SQL: "ADD " + idx.sql()}
		st.Clauses = []clause{cl}
		// Run as the equivalent ALTER so the algorithm rules apply.
		st.SQL = "ALTER TABLE " + toks[i+2].text + " " + cl.SQL
		return st, nil
	case kw(0) == "UPDATE":
		// The table is kept so a declared order.schema skips a data step
		// of the shop's tables as it skips their DDL.
		if len(toks) < 2 || toks[1].kind != tokWord {
			return st, fmt.Errorf("UPDATE: want the table after UPDATE")
		}
		st.Kind, st.Table = stmtData, identLower(toks[1])
		return st, nil
	}
	return st, fmt.Errorf("unsupported statement (the migrator understands CREATE TABLE IF NOT EXISTS, ALTER TABLE, CREATE INDEX and UPDATE): %.60s", sql)
}

func parseCreateTable(sql string, toks []token) (statement, error) {
	st := statement{SQL: sql, Kind: stmtCreateTable}
	i := 5
	if len(toks) <= 4 || keyword(toks[2]) != "IF" || keyword(toks[3]) != "NOT" || keyword(toks[4]) != "EXISTS" {
		return st, fmt.Errorf("CREATE TABLE must say IF NOT EXISTS (users' databases may already have the table)")
	}
	if i+1 >= len(toks) || toks[i].kind != tokWord || toks[i+1].kind != tokGroup {
		return st, fmt.Errorf("CREATE TABLE: want a parenthesised definition")
	}
	st.Table = identLower(toks[i])
	t := &table{Name: st.Table}
	err := t.readDefs(toks[i+1].text, func(ptoks []token) (bool, error) {
		switch keyword(ptoks[0]) {
		case "PRIMARY", "UNIQUE", "KEY", "INDEX":
			idx, err := parseIndexDef(ptoks)
			if err != nil {
				return false, err
			}
			t.Indexes = append(t.Indexes, idx)
			return false, nil
		case "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK", "PERIOD":
			return false, fmt.Errorf("%s definitions are not supported by the migrator", keyword(ptoks[0]))
		}
		return true, nil
	})
	if err != nil {
		return st, err
	}
	st.Options = strings.TrimSpace(sql[toks[i+1].end:])
	st.Create = t
	return st, nil
}

// parseLiveTable reads the columns and indexes of a table from its SHOW
// CREATE TABLE. It is lenient where parseCreateTable is strict: a user's
// table may have foreign keys, full-text indexes, checks or index options
// (USING BTREE), which the executor neither needs nor minds.
func parseLiveTable(create string) (*table, error) {
	toks := tokenize(create)
	i := 0
	for i < len(toks) && keyword(toks[i]) != "TABLE" {
		i++
	}
	if i+2 >= len(toks) || toks[i+2].kind != tokGroup {
		return nil, fmt.Errorf("not a CREATE TABLE: %.60s", create)
	}
	t := &table{Name: identLower(toks[i+1])}
	for k := i + 3; k+2 < len(toks); k++ {
		if keyword(toks[k]) == "ENGINE" && toks[k+1].text == "=" {
			t.Engine = toks[k+2].text
		}
	}
	err := t.readDefs(toks[i+2].text, func(ptoks []token) (bool, error) {
		switch keyword(ptoks[0]) {
		case "PRIMARY", "UNIQUE", "KEY", "INDEX":
			if idx, ok := parseLiveIndex(ptoks); ok {
				t.Indexes = append(t.Indexes, idx)
			}
			return false, nil
		case "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK", "PERIOD", "VECTOR":
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// readDefs reads the definitions in group, a CREATE TABLE's parenthesised
// list, into t. def sees each definition's tokens first: it takes an index
// (or refuses what it does not support) and reports whether the definition
// is a column, which readDefs then parses. Errors name the table.
func (t *table) readDefs(group string, def func(ptoks []token) (isColumn bool, err error)) error {
	for _, part := range splitTop(group) {
		ptoks := tokenize(part)
		if len(ptoks) == 0 {
			continue
		}
		isColumn, err := def(ptoks)
		if err == nil && isColumn {
			var c column
			if c, err = parseColumn(part); err == nil {
				t.Columns = append(t.Columns, c)
			}
		}
		if err != nil {
			return fmt.Errorf("table %s: %w", t.Name, err)
		}
	}
	return nil
}

// parseLiveIndex reads an index line of SHOW CREATE TABLE: a name (none for
// the primary key) and the first parenthesised group; options after it are
// ignored.
func parseLiveIndex(toks []token) (index, bool) {
	idx := index{Unique: keyword(toks[0]) == "PRIMARY" || keyword(toks[0]) == "UNIQUE"}
	for j, tk := range toks {
		if tk.kind != tokGroup {
			continue
		}
		idx.Columns = indexColumns(tk.text)
		switch {
		case keyword(toks[0]) == "PRIMARY":
			idx.Name = "primary"
		case j > 0 && toks[j-1].kind == tokWord && keyword(toks[j-1]) != "KEY" && keyword(toks[j-1]) != "INDEX":
			idx.Name = identLower(toks[j-1])
		default:
			return idx, false
		}
		return idx, true
	}
	return idx, false
}

// parseIndexDef parses PRIMARY KEY (cols), UNIQUE [KEY|INDEX] name (cols) or
// {KEY|INDEX} name (cols).
func parseIndexDef(toks []token) (index, error) {
	var idx index
	var i int
	switch strings.ToUpper(toks[0].text) {
	case "PRIMARY":
		if len(toks) != 3 || !strings.EqualFold(toks[1].text, "KEY") || toks[2].kind != tokGroup {
			return idx, fmt.Errorf("want PRIMARY KEY (columns)")
		}
		return index{Name: "primary", Columns: indexColumns(toks[2].text), Unique: true}, nil
	case "UNIQUE":
		idx.Unique = true
		i = 1
		if i < len(toks) && (strings.EqualFold(toks[i].text, "KEY") || strings.EqualFold(toks[i].text, "INDEX")) {
			i++
		}
	default: // KEY or INDEX
		i = 1
	}
	if i+1 < len(toks) && strings.EqualFold(toks[i].text, "IF") {
		return idx, fmt.Errorf("IF NOT EXISTS on an index: the migrator checks indexes itself")
	}
	if len(toks) != i+2 || toks[i].kind != tokWord || toks[i+1].kind != tokGroup {
		return idx, fmt.Errorf("want [UNIQUE] KEY name (columns): an index needs a name the executor can check")
	}
	idx.Name = identLower(toks[i])
	idx.Columns = indexColumns(toks[i+1].text)
	return idx, nil
}

// indexColumns reads "a, b(10), c DESC" as [a b c].
func indexColumns(group string) []string {
	var cols []string
	for _, p := range splitTop(group) {
		t := tokenize(p)
		if len(t) > 0 {
			cols = append(cols, identLower(t[0]))
		}
	}
	return cols
}

// parseColumn parses "name TYPE[(args)] attributes [FIRST|AFTER col]".
func parseColumn(def string) (column, error) {
	toks := tokenize(def)
	if len(toks) < 2 || toks[0].kind != tokWord || toks[1].kind != tokWord {
		return column{}, fmt.Errorf("column definition %q: want name and type", strings.TrimSpace(def))
	}
	c := column{Name: identLower(toks[0]), Nullable: true}
	typ := toks[1].text
	if len(toks) > 2 && toks[2].kind == tokGroup && toks[2].pos == toks[1].end {
		typ += "(" + toks[2].text + ")"
	}
	c.Type = normalizeType(typ)
	cut := len(def)
	for k := 2; k < len(toks); k++ {
		if toks[k].kind != tokWord {
			continue
		}
		switch strings.ToUpper(toks[k].text) {
		case "NOT":
			if k+1 < len(toks) && strings.EqualFold(toks[k+1].text, "NULL") {
				c.Nullable = false
			}
		case "PRIMARY", "AUTO_INCREMENT":
			c.Nullable = false
		case "FIRST", "AFTER":
			if toks[k].pos < cut {
				cut = toks[k].pos
			}
		}
	}
	c.Def = squeeze(def[toks[1].pos:cut])
	return c, nil
}

// parseClause parses one ALTER TABLE clause: ADD [COLUMN] definition,
// ADD [UNIQUE] KEY|INDEX name (columns) or DROP INDEX name.
func parseClause(sql string) (clause, error) {
	sql = strings.TrimSpace(sql)
	toks := tokenize(sql)
	c := clause{SQL: sql}
	up := func(i int) string { return wordAt(toks, i) }
	switch {
	case up(0) == "ALGORITHM" || up(0) == "LOCK":
		return c, fmt.Errorf("%s in a migration file: the migrator chooses ALGORITHM and LOCK itself", up(0))
	case up(0) == "ADD" && (up(1) == "UNIQUE" || up(1) == "KEY" || up(1) == "INDEX"):
		idx, err := parseIndexDef(toks[1:])
		if err != nil {
			return c, err
		}
		c.Kind, c.Index = addIndex, idx
		return c, nil
	case up(0) == "ADD" && up(1) == "COLUMN" && len(toks) > 2 && up(2) != "IF":
		col, err := parseColumn(sql[toks[2].pos:])
		if err != nil {
			return c, err
		}
		c.Kind, c.Column = addColumn, col
		return c, nil
	case up(0) == "DROP" && up(1) == "INDEX" && len(toks) == 3:
		c.Kind, c.Name = dropIndex, identLower(toks[2])
		return c, nil
	case up(0) == "DROP" && up(1) == "PRIMARY" && up(2) == "KEY" && len(toks) == 3:
		c.Kind, c.Name = dropIndex, "primary"
		return c, nil
	case up(0) == "ADD" && up(1) == "PRIMARY":
		idx, err := parseIndexDef(toks[1:])
		if err != nil {
			return c, err
		}
		c.Kind, c.Index = addIndex, idx
		return c, nil
	}
	return c, fmt.Errorf("unsupported ALTER TABLE clause (the migrator understands ADD COLUMN, ADD [UNIQUE] KEY|INDEX, DROP INDEX and DROP PRIMARY KEY with ADD PRIMARY KEY): %.60s", sql)
}

// pairPrimary checks that an ALTER changes its primary key only by
// replacing it (DROP PRIMARY KEY with an ADD PRIMARY KEY after it: a
// table is never left without one) and gives the drop its replacement, so
// that planning can leave out both once the new key is there.
func pairPrimary(st statement) error {
	drop, add := -1, -1
	for i, c := range st.Clauses {
		switch {
		case c.Kind == dropIndex && c.Name == "primary":
			drop = i
		case c.Kind == addIndex && c.Index.Name == "primary":
			add = i
		}
	}
	switch {
	case drop < 0 && add < 0:
		return nil
	case drop < 0:
		return fmt.Errorf("ALTER TABLE %s: ADD PRIMARY KEY without DROP PRIMARY KEY before it: a table's primary key is replaced, never added", st.Table)
	case add < drop:
		return fmt.Errorf("ALTER TABLE %s: DROP PRIMARY KEY needs an ADD PRIMARY KEY after it: a table is never left without one", st.Table)
	}
	st.Clauses[drop].Replace = &st.Clauses[add].Index
	return nil
}

// wordAt is token i upper-cased when it is a word, "" otherwise (or past
// the end).
func wordAt(toks []token, i int) string {
	if i < len(toks) && toks[i].kind == tokWord {
		return strings.ToUpper(toks[i].text)
	}
	return ""
}
