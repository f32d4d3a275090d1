package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// statementProfileSQL reads what the server ran in one database, statement
// shape by shape (performance_schema's digest summary, kept per schema, so
// no reset is needed: every row of the bench drains a database of its
// own). Timer values are picoseconds. The drain's statements are read
// before its invariant check runs in the same database.
const statementProfileSQL = `
SELECT COUNT_STAR, SUM_TIMER_WAIT, SUM_LOCK_TIME, SUM_ROWS_EXAMINED, SUM_ROWS_AFFECTED + SUM_ROWS_SENT, DIGEST_TEXT
FROM performance_schema.events_statements_summary_by_digest
WHERE SCHEMA_NAME = ?
ORDER BY SUM_TIMER_WAIT DESC`

// statementProfile renders (with -statements) the server-side profile of a drain of database
// name that closed closed orders in pages of pageSize: per statement shape,
// how often it ran per page, its mean time and its share of the time. It
// says so instead when performance_schema is off (it
// cannot be switched on at run time; start the server with
// --performance-schema=ON, e.g. a private one).
func (b *closeBench) statementProfile(ctx context.Context, name string, closed int) string {
	if !b.f.statements {
		return ""
	}
	var out strings.Builder
	all, total, err := statementShapes(ctx, b.dbs.admin, name)
	if err != nil {
		return fmt.Sprintf("  (statement profile: %v)\n", err)
	}
	pages := float64(max(1, (closed+b.f.pageSize-1)/b.f.pageSize))
	fmt.Fprintf(&out, "  server time %.0f ms over %d statements, %.2f ms and %.1f statements per page of %d:\n",
		float64(total)/1e9, sum(all, func(s statementShape) int64 { return s.n }), float64(total)/1e9/pages,
		float64(sum(all, func(s statementShape) int64 { return s.n }))/pages, b.f.pageSize)
	fmt.Fprintf(&out, "  %8s %7s %8s %8s %6s %10s  %s\n", "count", "/page", "mean ms", "lock ms", "share", "rows read", "statement")
	for _, s := range all {
		if float64(s.wait) < 0.005*float64(total) {
			continue // under half a percent
		}
		text := strings.Join(strings.Fields(s.text), " ")
		if len(text) > 90 {
			text = text[:90] + "…"
		}
		fmt.Fprintf(&out, "  %8d %7.2f %8.3f %8.3f %5.1f%% %10d  %s\n", s.n, float64(s.n)/pages,
			float64(s.wait)/float64(s.n)/1e9, float64(s.lock)/float64(s.n)/1e9, 100*float64(s.wait)/float64(total), s.examined, text)
	}
	return out.String()
}

// statementShape is one row of statementProfileSQL: a statement shape's
// count, total and lock time (ps), rows examined and rows touched.
type statementShape struct {
	n                 int64
	wait, lock        int64
	examined, touched int64
	text              string
}

// statementShapes reads the statement shapes the server ran in database
// name, most time first, and their total time (ps).
func statementShapes(ctx context.Context, db *sqlx.DB, name string) ([]statementShape, int64, error) {
	var on int
	if err := db.GetContext(ctx, &on, `SELECT @@performance_schema`); err != nil || on == 0 {
		return nil, 0, errors.New("performance_schema is off on this server")
	}
	rows, err := db.QueryContext(ctx, statementProfileSQL, name)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var all []statementShape
	var total int64
	for rows.Next() {
		var s statementShape
		if err := rows.Scan(&s.n, &s.wait, &s.lock, &s.examined, &s.touched, &s.text); err != nil {
			return nil, 0, err
		}
		all = append(all, s)
		total += s.wait
	}
	return all, total, rows.Err()
}

func sum[T any](xs []T, f func(T) int64) int64 {
	var n int64
	for _, x := range xs {
		n += f(x)
	}
	return n
}
