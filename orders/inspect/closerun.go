package inspect

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/oplist"
)

// CloseRun is one row of order_close_run, which every close run
// (orders.Closer.Run) leaves when it ends: the record it wrote, with the
// row's id and the time the database stamped its finish.
type CloseRun struct {
	ID         int64     `db:"id"`
	FinishedAt time.Time `db:"finished_at"`
	orders.RunRecord
}

// Failed reports whether the run stopped on an error or dead-lettered
// orders (what the XXL-JOB admin shows as a failed run).
func (r CloseRun) Failed() bool { return r.Error != "" || r.DeadLettered > 0 }

// MaxLateness is MaxLatenessMs as a duration.
func (r CloseRun) MaxLateness() time.Duration {
	return time.Duration(r.MaxLatenessMs) * time.Millisecond
}

// CloseRuns reads the records of close runs for operators. It needs only
// the database and is safe for concurrent use.
type CloseRuns struct {
	db    *sqlx.DB
	store store
}

// NewCloseRuns returns the view over db.
func NewCloseRuns(db *sqlx.DB) *CloseRuns { return &CloseRuns{db: db} }

// Recent returns up to limit (1-1000) records newest first, those with an
// id below beforeID when it is positive.
func (r *CloseRuns) Recent(ctx context.Context, beforeID int64, limit int) ([]CloseRun, error) {
	if limit < 1 || limit > oplist.MaxListLimit {
		return nil, oplist.Invalid("limit", "limit %d is not in 1..%d", limit, oplist.MaxListLimit)
	}
	if beforeID < 0 {
		return nil, oplist.Invalid("before", "before %d is negative", beforeID)
	}
	return r.store.recentCloseRuns(ctx, r.db, beforeID, limit)
}

// CloseRunSummary adds up the runs that finished within a window.
type CloseRunSummary struct {
	Window       time.Duration
	Runs         int
	Failed       int // stopped by an error or dead-lettered orders
	Closed       int
	DeadLettered int
	// MaxLateness is the largest of the runs' MaxLateness.
	MaxLateness time.Duration
	// Capped is true when more runs finished in the window than were
	// added up (summaryCap): the figures cover the newest of them.
	Capped bool
}

// summaryCap bounds the records Summary adds up.
const summaryCap = 20000

// Summary adds up the runs that finished in the last window (by the
// database clock), at most 20,000 of them (the newest).
func (r *CloseRuns) Summary(ctx context.Context, window time.Duration) (CloseRunSummary, error) {
	s, err := r.store.summarizeCloseRuns(ctx, r.db, window, summaryCap)
	s.Window = window
	return s, err
}
