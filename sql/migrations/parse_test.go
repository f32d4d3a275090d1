package migrations

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestParseCreateTable(t *testing.T) {
	t.Parallel()
	st, err := parseStatement("CREATE TABLE IF NOT EXISTS `t` (\n  id BIGINT NOT NULL AUTO_INCREMENT,\n" +
		"  s TINYINT NOT NULL DEFAULT 0 COMMENT 'a, b (c)',\n  amt DECIMAL(12,2) NULL,\n" +
		"  PRIMARY KEY (id),\n  UNIQUE KEY uk_s (s, amt),\n  KEY idx_amt (amt(4) DESC)\n) ENGINE=InnoDB")
	require.NoError(t, err)
	require.Equal(t, stmtCreateTable, st.Kind)
	require.Equal(t, "t", st.Table)
	require.Equal(t, "ENGINE=InnoDB", st.Options)
	tb := st.Create
	require.Len(t, tb.Columns, 3, "the comma inside the comment does not split")
	require.Equal(t, column{Name: "id", Def: "BIGINT NOT NULL AUTO_INCREMENT", Type: "bigint", Nullable: false}, tb.Columns[0])
	require.Equal(t, "TINYINT NOT NULL DEFAULT 0 COMMENT 'a, b (c)'", tb.Columns[1].Def)
	require.Equal(t, "decimal(12,2)", tb.Columns[2].Type)
	require.True(t, tb.Columns[2].Nullable)
	require.Equal(t, []index{
		{Name: "primary", Columns: []string{"id"}, Unique: true},
		{Name: "uk_s", Columns: []string{"s", "amt"}, Unique: true},
		{Name: "idx_amt", Columns: []string{"amt"}},
	}, tb.Indexes)
}

func TestParseAlterClauses(t *testing.T) {
	t.Parallel()
	st, err := parseStatement("ALTER TABLE order_info ADD COLUMN pay_id VARCHAR(64) NULL AFTER order_no, DROP INDEX uk_x, " +
		"ADD UNIQUE KEY uk_pay (pay_id), ADD INDEX idx_pay (pay_id, id)")
	require.NoError(t, err)
	require.Equal(t, "order_info", st.Table)
	kinds := []clauseKind{}
	for _, c := range st.Clauses {
		kinds = append(kinds, c.Kind)
	}
	require.Equal(t, []clauseKind{addColumn, dropIndex, addIndex, addIndex}, kinds)
	require.Equal(t, "VARCHAR(64) NULL", st.Clauses[0].Column.Def, "the position is not part of the definition")
	require.Equal(t, "uk_x", st.Clauses[1].Name)
	require.Equal(t, index{Name: "uk_pay", Columns: []string{"pay_id"}, Unique: true}, st.Clauses[2].Index)
	require.Equal(t, index{Name: "idx_pay", Columns: []string{"pay_id", "id"}}, st.Clauses[3].Index)

	up, err := parseStatement("UPDATE payment_conflict SET payment_id = CONCAT('legacy:', order_no) WHERE payment_id = ''")
	require.NoError(t, err)
	require.Equal(t, stmtData, up.Kind)
	require.Equal(t, "payment_conflict", up.Table)

	ci, err := parseStatement("CREATE UNIQUE INDEX uk_a ON t (a, b)")
	require.NoError(t, err)
	require.Equal(t, stmtAlterTable, ci.Kind)
	require.Equal(t, "ALTER TABLE t ADD UNIQUE KEY uk_a (a, b)", ci.SQL, "runs as an ALTER, so the algorithm rules apply")
}

func TestParseRefusesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{
		"CREATE TABLE t (id INT)",                             // no IF NOT EXISTS
		"ALTER TABLE t ADD COLUMN c INT, ALGORITHM=INSTANT",   // the migrator picks it
		"ALTER TABLE t ADD FOREIGN KEY (a) REFERENCES u (id)", // not checked
		"ALTER TABLE t ADD INDEX (a)",                         // unnamed index
		"CREATE TABLE IF NOT EXISTS t (id INT, CONSTRAINT c CHECK (id > 0))",
		"GRANT SELECT ON t TO x",
		// What no migration file uses is not understood, so not checked.
		"ALTER TABLE t MODIFY COLUMN a BIGINT NOT NULL",
		"ALTER TABLE t CHANGE a b INT",
		"ALTER TABLE t RENAME INDEX a TO b",
		"ALTER TABLE t DROP COLUMN a",
		"ALTER TABLE t DROP PRIMARY KEY",
		"ALTER TABLE t ADD PRIMARY KEY (id)",
		"ALTER TABLE t ADD PRIMARY KEY (a, id), DROP PRIMARY KEY", // never without one
		"ALTER TABLE t ADD COLUMN IF NOT EXISTS a INT",
		"ALTER TABLE t DROP INDEX IF EXISTS a",
		"DROP TABLE t",
		"RENAME TABLE a TO b",
		"INSERT INTO t VALUES (1)",
		"DELETE FROM t",
	} {
		_, err := parseStatement(sql)
		require.Error(t, err, sql)
	}
}

// A primary key is replaced in one ALTER (0137), and planning leaves out
// both clauses once the new key is in place, the drop never alone.
func TestPrimaryKeyReplaced(t *testing.T) {
	t.Parallel()
	st, err := parseStatement("ALTER TABLE c ADD COLUMN u VARCHAR(64) NOT NULL DEFAULT '', DROP PRIMARY KEY, ADD PRIMARY KEY (u, a)")
	require.NoError(t, err)
	require.Len(t, st.Clauses, 3)
	require.Equal(t, &index{Name: "primary", Columns: []string{"u", "a"}, Unique: true}, st.Clauses[1].Replace)

	done := func(create string) []bool {
		tb, err := parseLiveTable(create)
		require.NoError(t, err)
		var out []bool
		for _, c := range st.Clauses {
			d, pr := clauseDone("c", tb, c)
			require.Nil(t, pr)
			if !d {
				applyClause(tb, c)
			}
			out = append(out, d)
		}
		return out
	}
	require.Equal(t, []bool{false, false, false},
		done("CREATE TABLE `c` (\n  `a` int NOT NULL,\n  PRIMARY KEY (`a`)\n) ENGINE=InnoDB"), "the old key: all three run")
	require.Equal(t, []bool{true, true, true},
		done("CREATE TABLE `c` (\n  `a` int NOT NULL,\n  `u` varchar(64) NOT NULL DEFAULT '',\n  PRIMARY KEY (`u`,`a`)\n) ENGINE=InnoDB"), "the new key: nothing runs")
	require.Equal(t, []bool{true, true, true},
		done("CREATE TABLE `c` (\n  `a` int NOT NULL,\n  `u` varchar(64) NOT NULL DEFAULT '',\n  PRIMARY KEY (`a`),\n  UNIQUE KEY `uk` (`u`,`a`)\n) ENGINE=InnoDB"),
		"a unique index over the new columns serves: nothing runs, the old key stays")
}

func TestEmbeddedFilesParse(t *testing.T) {
	t.Parallel()
	ms, err := All()
	require.NoError(t, err)
	want, err := expected(ms)
	require.NoError(t, err)
	oi := want["order_info"]
	require.NotNil(t, oi)
	for _, c := range []string{"coupon_id", "close_time", "close_reason", "pay_time", "pay_amount"} {
		require.NotNil(t, oi.column(c), c)
	}
	require.Equal(t, []string{"status", "create_time"}, oi.index("idx_status_create_time").Columns)
	for _, m := range ms {
		require.Len(t, m.Checksum, 64)
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	t.Parallel()
	_, err := load(fstest.MapFS{"0001_a.up.sql": {Data: []byte("ALTER TABLE nowhere ADD COLUMN c INT;")}})
	require.ErrorContains(t, err, "no earlier step creates the table")
	_, err = load(fstest.MapFS{"0001_A-b.up.sql": {Data: []byte("SELECT 1;")}})
	require.ErrorContains(t, err, "bad file name")
}

func TestTypeFamilies(t *testing.T) {
	t.Parallel()
	require.Equal(t, "bigint", normalizeType("bigint(20)"))
	require.Equal(t, "int", normalizeType("INT(10) UNSIGNED"))
	require.Equal(t, "decimal(12,2)", normalizeType("DECIMAL(12, 2)"))
	require.Equal(t, family("tinyint"), family("bigint"))
	require.Equal(t, family("varchar(32)"), family("varchar(64)"))
	require.NotEqual(t, family("datetime"), family("timestamp"))
	require.NotEqual(t, family("datetime(3)"), family("varchar(64)"))
}

func TestParseLiveTable(t *testing.T) {
	t.Parallel()
	tb, err := parseLiveTable("CREATE TABLE `Order_Info` (\n" +
		"  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n" +
		"  `key` varchar(64) NOT NULL COMMENT 'a, (b)',\n" +
		"  `create_time` timestamp NOT NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),\n" +
		"  `amt` decimal(12,2) DEFAULT NULL,\n" +
		"  `body` text,\n" +
		"  PRIMARY KEY (`id`) USING BTREE,\n" +
		"  UNIQUE KEY `uk_key` (`key`) USING HASH,\n" +
		"  KEY `idx_ct` (`create_time`,`key`(10)),\n" +
		"  FULLTEXT KEY `ft_body` (`body`),\n" +
		"  CONSTRAINT `fk_x` FOREIGN KEY (`id`) REFERENCES `other` (`id`)\n" +
		") ENGINE=InnoDB AUTO_INCREMENT=51 DEFAULT CHARSET=utf8mb4 COMMENT='t'")
	require.NoError(t, err)
	require.Equal(t, "order_info", tb.Name)
	types := map[string]string{}
	for _, c := range tb.Columns {
		types[c.Name] = c.Type
	}
	require.Equal(t, map[string]string{"id": "bigint", "key": "varchar(64)", "create_time": "timestamp", "amt": "decimal(12,2)", "body": "text"}, types)
	require.True(t, tb.column("amt").Nullable)
	require.False(t, tb.column("key").Nullable)
	require.Equal(t, []index{
		{Name: "primary", Columns: []string{"id"}, Unique: true},
		{Name: "uk_key", Columns: []string{"key"}, Unique: true},
		{Name: "idx_ct", Columns: []string{"create_time", "key"}},
	}, tb.Indexes, "full-text indexes and foreign keys are not the executor's business")
}

// FuzzParseStatement: no input makes the statement parser panic, and what
// it accepts names its table, as planning relies on. The seeds are every
// statement of the embedded files.
func FuzzParseStatement(f *testing.F) {
	ms, err := All()
	require.NoError(f, err)
	for _, m := range ms {
		for _, s := range m.Statements {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, sql string) {
		st, err := parseStatement(sql)
		if err != nil {
			return
		}
		if st.Table == "" {
			t.Fatalf("%q parsed without a table", sql)
		}
		if st.Kind == stmtCreateTable && st.Create == nil {
			t.Fatalf("%q: CREATE TABLE without a definition", sql)
		}
		if st.Kind == stmtAlterTable && len(st.Clauses) == 0 {
			t.Fatalf("%q: ALTER TABLE without a clause", sql)
		}
	})
}
