package deadletters

import (
	"context"
	"fmt"
	"time"

	"github.com/orderjob/executor/orders/oplist"
)

// Query selects a page of letters for an operator's list. Every
// page reads at most a bounded window of index entries, whatever the
// filters: Status (and the time range, which needs it) narrow the index
// range; Stage and ErrorLike are checked on the rows of that range, so a
// page that finds too few stops at the window and offers to go on (Next).
type Query struct {
	// Status: Waiting, Parked, Resolved, or
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
	After oplist.Cursor
	// Limit is the page size, 1-200. Default 50.
	Limit int
}

// Page is one page of a list.
type Page struct {
	Letters []Letter
	// Next continues the list; zero when it has no more rows.
	Next oplist.Cursor
	// Examined is how many letters of the index range were looked at.
	Examined int
	// WindowFull is true when the page stopped at the search window before
	// it was full: older letters exist that this page did not look at.
	WindowFull bool
}

func (q *Query) check() error {
	if err := oplist.CheckStatus(q.Status, Waiting, Parked, Resolved); err != nil {
		return err
	}
	if len(q.Stage) > maxLetterStageLen {
		return oplist.Invalid("stage", "stage must be at most %d bytes", maxLetterStageLen)
	}
	if len(q.ErrorLike) > maxErrorLikeLen {
		return oplist.Invalid("error", "error text must be at most %d bytes", maxErrorLikeLen)
	}
	timed := !q.Since.IsZero() || !q.Until.IsZero()
	switch {
	case timed && q.Status == "":
		return oplist.Invalid("status", "a time range needs a status (the range is read over one status)")
	case q.ErrorLike != "" && q.Since.IsZero():
		return oplist.Invalid("error", "error text needs a time range (since), so that no search reads every letter")
	case !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since):
		return oplist.Invalid("until", "until must be after since")
	case q.Status == "" && !q.After.At.IsZero(), q.Status != "" && !q.After.IsZero() && q.After.At.IsZero():
		return oplist.Invalid("after", "after %q belongs to another list", q.After)
	}
	if err := oplist.CheckLimit(&q.Limit); err != nil {
		return err
	}
	return nil
}

// Page returns one page of letters (see Query).
func (d *Ops) Page(ctx context.Context, q Query) (Page, error) {
	var p Page
	if err := q.check(); err != nil {
		return p, err
	}
	window := q.Limit + 1
	if q.Stage != "" || q.ErrorLike != "" {
		window = oplist.SearchWindow
	}
	keys, err := d.store.letterWindow(ctx, d.db, q, window)
	if err != nil {
		return p, err
	}
	r, err := letterList.Pick(ctx, d.db, keys, q.Limit, window, q.Status != "")
	p.Letters, p.Next, p.Examined, p.WindowFull = r.Rows, r.Next, r.Examined, r.WindowFull
	return p, err
}

// GetByID returns the letter with the id, or ErrNotFound.
func (d *Ops) GetByID(ctx context.Context, id int64) (*Letter, error) {
	if id < 1 {
		return nil, oplist.Invalid("id", "id %d is not a letter id", id)
	}
	dl, err := letterList.Get(ctx, d.db, id)
	if err != nil {
		return nil, err
	}
	if dl == nil {
		return nil, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	return dl, nil
}
