package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/orderjob/executor/internal/keyset"
)

// DeadLetterQuery selects a page of letters for an operator's list. Every
// page reads at most a bounded window of index entries, whatever the
// filters: Status (and the time range, which needs it) narrow the index
// range; Stage and ErrorLike are checked on the rows of that range, so a
// page that finds too few stops at the window and offers to go on (Next).
type DeadLetterQuery struct {
	// Status: DeadLetterWaiting, DeadLetterParked, DeadLetterResolved, or
	// "" for all (then newest id first; with a status, most recently
	// changed first, over idx_status_updated).
	Status string
	// Stage keeps only letters of this stage; "" all.
	Stage string
	// Since and Until bound updated_at (Since inclusive, Until exclusive;
	// zero: open), on the database session's wall clock. They need Status.
	Since, Until time.Time
	// ErrorLike keeps only letters whose last error contains it (% and _
	// are wildcards); it needs Since, so that no filter reads every letter
	// of a status. At most 200 bytes.
	ErrorLike string
	// After continues a list where its previous page's Next left off.
	After Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// Cursor is a position in an operator's list (see keyset.Cursor).
type Cursor = keyset.Cursor

// ParseCursor reads what Cursor.String writes; a bad one is an
// *InvalidInputError naming "after".
func ParseCursor(s string) (Cursor, error) {
	c, err := keyset.ParseCursor(s)
	if err != nil {
		return c, invalidInput("after", "%v", err)
	}
	return c, nil
}

// DeadLetterPage is one page of a list.
type DeadLetterPage struct {
	Letters []DeadLetter
	// Next continues the list; zero when it has no more rows.
	Next Cursor
	// Examined is how many letters of the index range were looked at.
	Examined int
	// WindowFull is true when the page stopped at the search window before
	// it was full: older letters exist that this page did not look at.
	WindowFull bool
}

// Page sizes and the search window of lists with row filters.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
	// SearchWindow is how many index entries a page with row filters
	// (stage, error text, handler, ...) looks at, at most.
	SearchWindow = 2000
)

func (q *DeadLetterQuery) check() error {
	if q.Status != "" && !ValidDeadLetterStatus(q.Status) {
		return invalidInput("status", "status %q is not waiting, parked or resolved", q.Status)
	}
	if len(q.Stage) > maxLetterStageLen {
		return invalidInput("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	if len(q.ErrorLike) > maxErrorLikeLen {
		return invalidInput("error", "error text must be at most %d bytes", maxErrorLikeLen)
	}
	timed := !q.Since.IsZero() || !q.Until.IsZero()
	switch {
	case timed && q.Status == "":
		return invalidInput("status", "a time range needs a status (the range is read over one status)")
	case q.ErrorLike != "" && q.Since.IsZero():
		return invalidInput("error", "error text needs a time range (since), so that no search reads every letter")
	case !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since):
		return invalidInput("until", "until must be after since")
	case q.Status == "" && !q.After.At.IsZero(), q.Status != "" && !q.After.IsZero() && q.After.At.IsZero():
		return invalidInput("after", "after %q belongs to another list", q.After)
	}
	if q.Limit == 0 {
		q.Limit = DefaultPageLimit
	}
	if q.Limit < 1 || q.Limit > MaxPageLimit {
		return invalidInput("limit", "limit %d is not in 1..%d", q.Limit, MaxPageLimit)
	}
	return nil
}

// Page returns one page of letters (see DeadLetterQuery).
func (d *DeadLetters) Page(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error) {
	var p DeadLetterPage
	if err := q.check(); err != nil {
		return p, err
	}
	window := q.Limit + 1
	if q.Stage != "" || q.ErrorLike != "" {
		window = SearchWindow
	}
	keys, err := d.store.letterWindow(ctx, d.db, q, window)
	if err != nil {
		return p, err
	}
	var ids []int64
	ids, p.Next, p.Examined, p.WindowFull = pickWindow(keys, q.Limit, window, q.Status != "")
	if p.Letters, err = d.store.lettersByID(ctx, d.db, ids); err != nil {
		return p, err
	}
	inOrder(p.Letters, ids, func(l DeadLetter) int64 { return l.ID })
	return p, nil
}

// GetByID returns the letter with the id, or ErrDeadLetterNotFound.
func (d *DeadLetters) GetByID(ctx context.Context, id int64) (*DeadLetter, error) {
	if id < 1 {
		return nil, invalidInput("id", "id %d is not a letter id", id)
	}
	dl, err := d.store.letterByID(ctx, d.db, id)
	if err != nil {
		return nil, err
	}
	if dl == nil {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrDeadLetterNotFound)
	}
	return dl, nil
}
