package inspect

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/oplist"
)

// CloseRun is one row of order_close_run, which every close run
// (orders.Closer.Run) leaves when it ends. Times are the database session's
// wall clock, like order_info's.
type CloseRun struct {
	ID            int64     `db:"id"`
	StartedAt     time.Time `db:"started_at"`
	FinishedAt    time.Time `db:"finished_at"`
	Host          string    `db:"host"`
	Source        string    `db:"source"`
	ShardIndex    int       `db:"shard_index"`
	ShardTotal    int       `db:"shard_total"`
	DryRun        bool      `db:"dry_run"`
	Scanned       int       `db:"scanned"`
	Closed        int       `db:"closed"`
	SkippedPaid   int       `db:"skipped_paid"`
	SkippedLocked int       `db:"skipped_locked"`
	DeadLettered  int       `db:"dead_lettered"`
	LockErrors    int       `db:"lock_errors"`
	TradeErrors   int       `db:"trade_errors"`
	// MaxLatenessMs is orders.RunStats.MaxLateness in milliseconds.
	MaxLatenessMs int64 `db:"max_lateness_ms"`
	// Result is the run's summary line (orders.RunStats.String).
	Result string `db:"result"`
	// Error is what stopped the run ("" when it finished).
	Error string `db:"error"`
	// LogID is the XXL-JOB admin's log id of the run (0: none).
	LogID int64 `db:"log_id"`
	// OrderSource and OrderTable are the unit the run closed in: the
	// order database (orders.CloserConfig.SourceName) and its order table;
	// '' on records written before there were several.
	OrderSource string `db:"order_source"`
	OrderTable  string `db:"order_table"`
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
