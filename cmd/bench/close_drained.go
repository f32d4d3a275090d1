package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// drainedTable is one order table a row closed in, and how to count its
// orders: those closed, and those unpaid that were due at a time.
type drainedTable struct {
	db             *sqlx.DB
	closed, unpaid string // queries; unpaid's argument is the time
}

// ourTable is drainedTable of an order table of our schema.
func ourTable(db *sqlx.DB, table string) drainedTable {
	return drainedTable{db: db,
		closed: "SELECT COUNT(*) FROM `" + table + "` WHERE status = 2",
		unpaid: "SELECT COUNT(*) FROM `" + table + "` WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= ?"}
}

// dbNow is the database's clock, as the close reads it.
func dbNow(ctx context.Context, db *sqlx.DB) (time.Time, error) {
	var now time.Time
	if err := db.GetContext(ctx, &now, "SELECT NOW()"); err != nil {
		return now, fmt.Errorf("read the database's clock: %w", err)
	}
	return now, nil
}

// drained checks a row whose run, started at start by the database's
// clock, says it closed closed orders of tables, which held due orders
// when laid out: every order due at the start is closed, and each once
// (the tables hold exactly closed closed orders: more would be a close
// the run did not count, fewer one counted twice). Orders that fell due
// during the run may be among them: at 1,000,000 orders the sources rows
// outlast the youngest orders' timeout. A failure fails the bench.
func (b *closeBench) drained(ctx context.Context, name string, closed, due int, start time.Time, tables []drainedTable) error {
	inTables, left := 0, 0
	for _, t := range tables {
		var n, l int
		if err := t.db.GetContext(ctx, &n, t.closed); err != nil {
			return fmt.Errorf("%s: count closed orders: %w", name, err)
		}
		if err := t.db.GetContext(ctx, &l, t.unpaid, start); err != nil {
			return fmt.Errorf("%s: count orders left due: %w", name, err)
		}
		inTables, left = inTables+n, left+l
	}
	if closed < due || closed != inTables || left > 0 {
		b.failed = append(b.failed, fmt.Sprintf("%s closed %d orders (%d due when laid out), the tables hold %d closed; %d due at the start left open",
			name, closed, due, inTables, left))
	}
	return nil
}
