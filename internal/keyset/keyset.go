// Package keyset picks a page of an operator's list out of a search window.
//
// Lists over large tables read a bounded window of index entries per page,
// in keyset order from a cursor (never OFFSET): the index range comes from
// the filters the index serves (a status, a time range), and the filters
// it cannot serve (an error text, a handler) are evaluated on the rows of
// that window only. A page with few matches therefore stops at the
// window's end and offers to go on from there, instead of reading the
// whole table to fill itself.
package keyset

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Pick chooses a page from a window of rows in list order, hits[i] telling
// whether row i passed the row filters. It returns the indexes of up to
// limit matching rows, the index of the row the next page continues after
// (-1: the list ends here), and whether the page stopped at the end of a
// full window before it was full. window is the number of rows the query
// asked for: a window that came back shorter reached the end of the range.
// A query without row filters asks for limit+1 rows, the extra one telling
// whether a next page exists.
func Pick(hits []bool, limit, window int) (picked []int, next int, windowFull bool) {
	for i, hit := range hits {
		if !hit {
			continue
		}
		picked = append(picked, i)
		if len(picked) == limit {
			if i < len(hits)-1 || len(hits) == window {
				return picked, i, false
			}
			return picked, -1, false
		}
	}
	if len(hits) > 0 && len(hits) == window {
		return picked, len(hits) - 1, true
	}
	return picked, -1, false
}

// Cursor is a position in a list: the key of the last row looked at (the
// row's time column in lists ordered by one, and its id). The zero value is
// the start.
type Cursor struct {
	At time.Time
	ID int64
}

// IsZero reports whether c is the start of a list.
func (c Cursor) IsZero() bool { return c.ID == 0 }

// String renders c for a URL: "ID", or "YYYYMMDDhhmmss.fff~ID" with a time.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	if c.At.IsZero() {
		return strconv.FormatInt(c.ID, 10)
	}
	return c.At.Format(cursorTimeLayout) + "~" + strconv.FormatInt(c.ID, 10)
}

const cursorTimeLayout = "20060102150405.000"

// BeforeID is c as the exclusive upper bound of a list that walks down by
// id: its id, or past every id at the start.
func (c Cursor) BeforeID() int64 {
	if c.IsZero() {
		return math.MaxInt64
	}
	return c.ID
}

// Before is c as the exclusive upper bound of a list that walks down by
// (time, id): its key, or at the start end (a time past every row's) and
// past every id.
func (c Cursor) Before(end time.Time) (time.Time, int64) {
	if c.IsZero() {
		return end, math.MaxInt64
	}
	return c.At, c.ID
}

// ParseCursor reads what Cursor.String writes ("" is the start).
func ParseCursor(s string) (Cursor, error) {
	var c Cursor
	if s == "" {
		return c, nil
	}
	at, id, timed := strings.Cut(s, "~")
	if !timed {
		id = at
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 1 {
		return Cursor{}, fmt.Errorf("after %q is not a list position", s)
	}
	c.ID = n
	if timed {
		if c.At, err = time.Parse(cursorTimeLayout, at); err != nil {
			return Cursor{}, fmt.Errorf("after %q is not a list position", s)
		}
	}
	return c, nil
}
