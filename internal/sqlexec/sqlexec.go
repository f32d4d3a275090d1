// Package sqlexec holds the small pieces every store over the order and
// task tables runs its statements with: named parameters (Named), a
// transaction that rolls back on error or panic, the database clock,
// integer lists rendered as SQL literals, text cut to a column's width, and
// the ends of DATETIME's range that open cursors and time ranges use.
package sqlexec

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
)

// InTx runs fn in a transaction and commits it when fn returns nil; any
// error or panic rolls back. READ COMMITTED: every read that matters is a
// locking read of rows by key, so the level changes no result, but it takes
// no gap locks (REPEATABLE READ would lock index gaps next to missing dead
// letters and inventory keys and make concurrent closes wait).
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) (err error) {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return runTx(tx, fn)
}

// runTx runs fn in tx and commits it when fn returns nil; any error or
// panic rolls back.
func runTx(tx *sqlx.Tx, fn func(tx *sqlx.Tx) error) error {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return &commitError{err: err}
	}
	return nil
}

// commitError is a failed COMMIT: whether the transaction took effect is
// unknown, so it is never run again.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// InTxAgainOnStaleConn is InTx for a transaction whose fn only changes the
// database, run again when a pooled connection turns out dead, or led to a
// server that answered read-only (go-sql-driver's rejectReadOnly): both
// reach fn as driver.ErrBadConn, and the driver discards the connection.
// After a failover behind a virtual IP the pool can hold several such idle
// connections to the old primary, so it tries once more for each idle
// connection left in the pool after the first failure, and once on a new
// one. A failed COMMIT is never run again (its outcome is unknown), nor is
// any other error.
func InTxAgainOnStaleConn(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	again := -1 // counted at the first failure: nothing extra on the usual path
	for try := 0; ; try++ {
		err := InTx(ctx, db, fn)
		var ce *commitError
		if err == nil || !errors.Is(err, driver.ErrBadConn) || errors.As(err, &ce) || ctx.Err() != nil {
			return err
		}
		if again < 0 {
			again = db.Stats().Idle + 1
		}
		if try >= again {
			return err
		}
	}
}

// nowSQL reads the database clock in the session time zone, the zone
// create_time is written in. No locks; one row.
const nowSQL = `SELECT NOW(3)`

// Now reads the database clock: the one referee of "due" that every
// executor and the order service share.
func Now(ctx context.Context, q sqlx.QueryerContext) (time.Time, error) {
	var now time.Time
	if err := sqlx.GetContext(ctx, q, &now, nowSQL); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return now, nil
}

// IntList renders ids as a comma-separated literal list for an IN (...).
// They are int64 values, so they cannot carry anything but digits, and a
// page of 500 orders would otherwise bind thousands of placeholders.
func IntList(ids []int64) string {
	b := make([]byte, 0, len(ids)*8)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// PrintableASCII reports whether s holds only printable ASCII. A filter
// with other characters on an ASCII column matches no row, and MariaDB
// fails the comparison ("Illegal mix of collations") instead of saying so:
// such a filter is refused before any SQL.
func PrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Truncate cuts s to at most n characters (runes: the columns are utf8mb4),
// ending a cut text with "...". Runs of bytes that are not UTF-8 (a
// service's reply in GBK, quoted in an error) become U+FFFD: the columns
// refuse them (Error 1366), and the row would not be written at all.
func Truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// Earliest and Latest are the ends of DATETIME's range: the start of a
// cursor that walks up, and the open end of a time range or of a cursor
// that walks down.
var (
	Earliest = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	Latest   = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)
