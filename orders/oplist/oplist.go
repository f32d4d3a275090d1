// Package oplist holds what the operators' lists over the order tables
// share (dead letters, outbox events, refunds owed, close runs, flags): the
// error they return for input that cannot be used, page limits, cursors and
// the search window a page with row filters reads at most (over
// internal/keyset), and the layout their wall-clock times are shown in.
package oplist

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/keyset"
	"github.com/orderjob/executor/internal/sqlexec"
)

// InvalidInputError is an operator input that cannot be used; Field names it.
type InvalidInputError struct {
	Field string
	Msg   string
}

func (e *InvalidInputError) Error() string { return e.Msg }

// Invalid returns an *InvalidInputError for field.
func Invalid(field, format string, args ...any) error {
	return &InvalidInputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// WallTimeLayout renders the lists' times: ISO 8601 without a zone, since
// they are wall-clock values of the database session's zone (see package
// orders on time zones).
const WallTimeLayout = "2006-01-02T15:04:05.000"

// CheckWallTime refuses a time the database's DATETIME columns cannot hold
// (years 1000-9999), which a comparison would fail on instead of matching
// nothing: since=0000-01-01 answered 500.
func CheckWallTime(field string, t time.Time) error {
	if y := t.Year(); y < 1000 || y > 9999 {
		return Invalid(field, "%s %s is outside the years 1000-9999", field, t.Format(time.DateOnly))
	}
	return nil
}

// CheckASCII refuses a filter on an ASCII column (event types, trace ids,
// handler names) that holds other characters: no row can match it, and
// MariaDB fails the comparison ("Illegal mix of collations") instead of
// saying so.
func CheckASCII(field, v string) error {
	if !sqlexec.PrintableASCII(v) {
		return Invalid(field, "%s %q is not printable ASCII", field, v)
	}
	return nil
}

// CheckUTF8 refuses a value for a utf8mb4 column that is not UTF-8 text:
// the server would fail the write (Error 1366).
func CheckUTF8(field, v string) error {
	if !utf8.ValidString(v) {
		return Invalid(field, "%s %q is not UTF-8 text", field, v)
	}
	return nil
}

// MaxOrderNoLen is order_no's width in every order table.
const MaxOrderNoLen = 64

// CheckOrderNo refuses an order number filter wider than order_no.
func CheckOrderNo(orderNo string) error {
	if len(orderNo) > MaxOrderNoLen {
		return Invalid("orderNo", "order number must be at most %d bytes", MaxOrderNoLen)
	}
	return nil
}

// CheckStatus refuses a status filter that is neither "" (any) nor one of
// statuses (two or more), naming them in their order.
func CheckStatus(status string, statuses ...string) error {
	if status == "" || slices.Contains(statuses, status) {
		return nil
	}
	last := len(statuses) - 1
	return Invalid("status", "status %q is not %s or %s", status, strings.Join(statuses[:last], ", "), statuses[last])
}

// MaxListLimit caps the limit of the lists paged by id (CheckPage).
const MaxListLimit = 1000

// CheckPage fills the default page size (50) and checks a list's limit and
// before id.
func CheckPage(limit *int, before int64) error {
	if *limit == 0 {
		*limit = 50
	}
	if *limit < 1 || *limit > MaxListLimit {
		return Invalid("limit", "limit %d is not in 1..%d", *limit, MaxListLimit)
	}
	if before < 0 {
		return Invalid("before", "before %d is negative", before)
	}
	return nil
}

// Page sizes and the search window of the console's lists.
const (
	DefaultPageLimit = 50
	maxPageLimit     = 200
	// SearchWindow is how many index entries a page with row filters
	// (stage, error text, handler, ...) looks at, at most.
	SearchWindow = 2000
)

// CheckLimit fills the default page size (DefaultPageLimit) and checks a
// console page's limit.
func CheckLimit(limit *int) error {
	if *limit == 0 {
		*limit = DefaultPageLimit
	}
	if *limit < 1 || *limit > maxPageLimit {
		return Invalid("limit", "limit %d is not in 1..%d", *limit, maxPageLimit)
	}
	return nil
}

// Cursor is a position in an operator's list (see keyset.Cursor).
type Cursor = keyset.Cursor

// ParseCursor reads what Cursor.String writes; a bad one is an
// *InvalidInputError naming "after".
func ParseCursor(s string) (Cursor, error) {
	c, err := keyset.ParseCursor(s)
	if err != nil {
		return c, Invalid("after", "%v", err)
	}
	if !c.At.IsZero() {
		if err := CheckWallTime("after", c.At); err != nil {
			return Cursor{}, err
		}
	}
	return c, nil
}

// CheckCursorKind refuses a cursor of another list: timed lists (ordered by
// a time column) carry the time in their cursors, the others do not.
func CheckCursorKind(after Cursor, timed bool) error {
	if !after.IsZero() && after.At.IsZero() == timed {
		return Invalid("after", "after %q belongs to another list", after)
	}
	return nil
}

// WindowKey is one row of a search window: its key, and whether it passed
// the row filters.
type WindowKey struct {
	ID  int64     `db:"id"`
	At  time.Time `db:"at"`
	Hit bool      `db:"hit"`
}

// PickWindow picks a page out of keys (keyset.Pick); timed says whether the
// list's cursor carries the time column.
func PickWindow(keys []WindowKey, limit, window int, timed bool) (ids []int64, next Cursor, examined int, full bool) {
	picked, next, examined, full := PickRows(keys, limit, window, timed, func(k WindowKey) WindowKey { return k })
	for _, k := range picked {
		ids = append(ids, k.ID)
	}
	return ids, next, examined, full
}

// PickRows is PickWindow over a window that reads whole rows: key gives a
// row's key and whether it passed the row filters.
func PickRows[T any](rows []T, limit, window int, timed bool, key func(T) WindowKey) (picked []T, next Cursor, examined int, full bool) {
	keys := make([]WindowKey, len(rows))
	hits := make([]bool, len(rows))
	for i, r := range rows {
		keys[i] = key(r)
		hits[i] = keys[i].Hit
	}
	idx, n, full := keyset.Pick(hits, limit, window)
	for _, i := range idx {
		picked = append(picked, rows[i])
	}
	if n >= 0 {
		next = Cursor{ID: keys[n].ID}
		if timed {
			next.At = keys[n].At
		}
	}
	return picked, next, len(rows), full
}

// InOrder sorts rows as ids lists them.
func InOrder[T any](rows []T, ids []int64, id func(T) int64) {
	pos := make(map[int64]int, len(ids))
	for i, v := range ids {
		pos[v] = i
	}
	slices.SortFunc(rows, func(a, b T) int { return pos[id(a)] - pos[id(b)] })
}

// WindowParams are the named parameters of an operator list's window
// statements: the filter evaluated on each row ("" for any; the outbox's
// event type), the status, the cursor (before_at, before_id: exclusive) and
// the window's size.
type WindowParams struct {
	Filter   string `db:"filter"`
	Status   string `db:"status"`
	BeforeAt any    `db:"before_at"`
	BeforeID int64  `db:"before_id"`
	Window   int    `db:"window"`
}

// Window reads a list's search window from after: byID (the whole list,
// newest id first) when p.Status is "", byStatus (one status, newest
// time first) otherwise. It sets p's cursor; the caller sets the rest.
func Window(ctx context.Context, q sqlx.QueryerContext, byID, byStatus string, after Cursor, p WindowParams) ([]WindowKey, error) {
	var keys []WindowKey
	query := byID
	if p.Status == "" {
		p.BeforeID = after.BeforeID()
	} else {
		query = byStatus
		p.BeforeAt, p.BeforeID = after.Before(sqlexec.Latest)
	}
	if err := sqlexec.SelectNamed(ctx, q, &keys, query, p); err != nil {
		return nil, err
	}
	return keys, nil
}
