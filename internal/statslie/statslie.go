// Package statslie makes MariaDB's optimizer statistics lie about a
// database's own tables, on purpose: the plan tests (internal/plantest) and
// `bench close` use it to show that the executor's statements keep their
// plans whatever the statistics say.
//
// MariaDB prefers its engine-independent statistics (mysql.table_stats,
// mysql.index_stats; use_stat_tables=PREFERABLY_FOR_QUERIES, the default)
// over InnoDB's own whenever rows for a table exist there, and reads them
// again after FLUSH TABLES. Tell writes such rows for the given tables of the
// connection's current database only and changes no server variable; the
// function it returns deletes them again. (Editing mysql.innodb_index_stats
// instead does not reliably reload InnoDB's statistics.)
package statslie

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Lie is what the statistics claim.
type Lie int

const (
	// OneValue claims that every prefix of every index of the tables (the
	// primary and unique ones too) holds a single value, so each lookup
	// seems to match the whole table: the measured way to make an IN list
	// longer than eq_range_index_dive_limit plan a full scan.
	OneValue Lie = iota + 1
	// Unique claims that every index prefix is unique, so any index the
	// WHERE mentions (a status, a time) seems to find one row: a list of
	// primary keys then loses to it.
	Unique
)

func (l Lie) String() string {
	switch l {
	case OneValue:
		return "one value per index"
	case Unique:
		return "every value unique"
	}
	return fmt.Sprintf("Lie(%d)", int(l))
}

// Tell writes lie l about tables of db's current database into
// mysql.table_stats (cardinality: the real row count, at least 1000) and
// mysql.index_stats (avg_frequency: that count for OneValue, 1 for Unique),
// then runs FLUSH TABLES on them so the next statements plan with the lie.
// undo deletes those rows and flushes again; call it even when Tell fails
// (it removes what was written).
func Tell(ctx context.Context, db *sqlx.DB, l Lie, tables ...string) (undo func(context.Context) error, err error) {
	var schema string
	if err := db.GetContext(ctx, &schema, `SELECT DATABASE()`); err != nil {
		return func(context.Context) error { return nil }, fmt.Errorf("statslie: current database: %w", err)
	}
	if schema == "" {
		return func(context.Context) error { return nil }, fmt.Errorf("statslie: no current database")
	}
	undo = func(ctx context.Context) error {
		for _, table := range tables {
			for _, q := range []string{`DELETE FROM mysql.table_stats WHERE db_name = ? AND table_name = ?`,
				`DELETE FROM mysql.index_stats WHERE db_name = ? AND table_name = ?`} {
				if _, err := db.ExecContext(ctx, q, schema, table); err != nil {
					return fmt.Errorf("statslie: remove the lie about %s: %w", table, err)
				}
			}
			if _, err := db.ExecContext(ctx, "FLUSH TABLES `"+table+"`"); err != nil {
				return fmt.Errorf("statslie: flush %s: %w", table, err)
			}
		}
		return nil
	}
	for _, table := range tables {
		if err := tell(ctx, db, l, schema, table); err != nil {
			return undo, err
		}
	}
	return undo, nil
}

func tell(ctx context.Context, db *sqlx.DB, l Lie, schema, table string) error {
	var n int64
	if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM `"+table+"`"); err != nil {
		return fmt.Errorf("statslie: count %s: %w", table, err)
	}
	n = max(n, 1000)
	if _, err := db.ExecContext(ctx, `REPLACE INTO mysql.table_stats (db_name, table_name, cardinality) VALUES (?, ?, ?)`,
		schema, table, n); err != nil {
		return fmt.Errorf("statslie: table_stats of %s: %w", table, err)
	}
	var parts []struct {
		Index string `db:"INDEX_NAME"`
		Seq   int    `db:"SEQ_IN_INDEX"`
	}
	if err := db.SelectContext(ctx, &parts, `SELECT INDEX_NAME, SEQ_IN_INDEX FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, table); err != nil {
		return fmt.Errorf("statslie: indexes of %s: %w", table, err)
	}
	freq := n
	if l == Unique {
		freq = 1
	}
	for _, p := range parts {
		if _, err := db.ExecContext(ctx, `REPLACE INTO mysql.index_stats (db_name, table_name, index_name, prefix_arity, avg_frequency)
			VALUES (?, ?, ?, ?, ?)`, schema, table, p.Index, p.Seq, freq); err != nil {
			return fmt.Errorf("statslie: index_stats of %s.%s: %w", table, p.Index, err)
		}
	}
	if _, err := db.ExecContext(ctx, "FLUSH TABLES `"+table+"`"); err != nil {
		return fmt.Errorf("statslie: flush %s: %w", table, err)
	}
	return nil
}
