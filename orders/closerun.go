package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// Every Run leaves one row in order_close_run when it ends, whatever its
// result: the history operators read (the console's recent runs and last
// hour) without touching order_close_log, which has no time index. The row
// is written after the run, outside its transactions; failing to write it
// is logged and changes nothing about the run.

// defaultRunRetention is how long run records are kept by default.
const defaultRunRetention = 7 * 24 * time.Hour

// runPurgeBatch bounds the old records one run deletes: a run every second
// writes one and deletes up to this many, so the table stays at its
// retention without a job of its own.
const runPurgeBatch = 100

// CloseRun is one row of order_close_run. Times are the database session's
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
	// MaxLatenessMs is RunStats.MaxLateness in milliseconds.
	MaxLatenessMs int64 `db:"max_lateness_ms"`
	// Result is the run's summary line (RunStats.String).
	Result string `db:"result"`
	// Error is what stopped the run ("" when it finished).
	Error string `db:"error"`
	// LogID is the XXL-JOB admin's log id of the run (0: none).
	LogID int64 `db:"log_id"`
	// OrderSource and OrderTable are the unit the run closed in: the
	// order database (CloserConfig.SourceName) and its order table; ''
	// on records written before there were several.
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

// recordRun writes the run's record and deletes a few expired ones. It runs
// under its own deadline and without ctx's cancellation: a run stopped by
// shutdown is recorded too.
func (c *Closer) recordRun(ctx context.Context, opt RunOptions, started time.Time, st RunStats, runErr error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r := CloseRun{StartedAt: started, Host: sqlexec.Truncate(c.cfg.Host, 64), Source: sqlexec.Truncate(opt.Source, 64),
		ShardIndex: opt.ShardIndex, ShardTotal: opt.ShardTotal, DryRun: opt.DryRun,
		Scanned: st.Scanned, Closed: st.Closed, SkippedPaid: st.SkippedPaid, SkippedLocked: st.SkippedLocked,
		DeadLettered: st.DeadLettered, LockErrors: st.LockErrors, TradeErrors: st.TradeErrors,
		MaxLatenessMs: st.MaxLateness.Milliseconds(), Result: sqlexec.Truncate(st.String(), 255), LogID: opt.LogID,
		OrderSource: c.cfg.SourceName, OrderTable: c.Table()}
	if runErr != nil {
		r.Error = sqlexec.Truncate(runErr.Error(), 2000)
		if errors.Is(runErr, context.Canceled) {
			r.Error = "stopped: " + r.Error
		}
	}
	err := c.store.insertCloseRun(rctx, c.db, r)
	if err == nil {
		err = c.store.purgeCloseRuns(rctx, c.db, c.cfg.RunRetention, runPurgeBatch)
	}
	if err != nil {
		c.log.WarnContext(ctx, "close run not recorded (the console's history misses it)", "err", err)
	}
}

// RecordInterrupted writes the record of a close run that an earlier
// process started and never finished (killed or crashed part-way, so it
// wrote none): opt as the run had it (LogID required), started by that
// process's clock, and reason (the executor's message) as its error. It
// writes nothing when a record of the same LogID started within a day of
// it exists already (the run's own, written before the process ended, or
// this one, by an earlier restart), so it may be called again.
func (c *Closer) RecordInterrupted(ctx context.Context, opt RunOptions, started time.Time, reason string) error {
	if opt.LogID <= 0 {
		return fmt.Errorf("record interrupted close run: log id %d is not positive", opt.LogID)
	}
	r := CloseRun{StartedAt: started, Host: sqlexec.Truncate(c.cfg.Host, 64), Source: sqlexec.Truncate(opt.Source, 64),
		ShardIndex: opt.ShardIndex, ShardTotal: opt.ShardTotal, DryRun: opt.DryRun,
		Error: sqlexec.Truncate(reason, 2000), LogID: opt.LogID, OrderSource: c.cfg.SourceName, OrderTable: c.Table()}
	added, err := c.store.insertInterruptedCloseRun(ctx, c.db, r)
	if err != nil {
		return err
	}
	if added {
		c.log.WarnContext(ctx, "close run interrupted by the end of the previous process recorded",
			"log_id", opt.LogID, "started_at", started)
	}
	return nil
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
	// added up (SummaryCap): the figures cover the newest of them.
	Capped bool
}

// SummaryCap bounds the records Summary adds up.
const SummaryCap = 20000

// Summary adds up the runs that finished in the last window (by the
// database clock), at most SummaryCap of them.
func (r *CloseRuns) Summary(ctx context.Context, window time.Duration) (CloseRunSummary, error) {
	s, err := r.store.summarizeCloseRuns(ctx, r.db, window, SummaryCap)
	s.Window = window
	return s, err
}
