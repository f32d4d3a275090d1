package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderjob/executor/internal/sqlexec"
)

// Every Run leaves one row in order_close_run when it ends, whatever its
// result: the history operators read (inspect.CloseRuns: the console's
// recent runs and last hour) without touching order_close_log, which has
// no time index. The row is written after the run, outside its
// transactions; failing to write it is logged and changes nothing about
// the run.

// DefaultRunRetention is how long run records are kept by default
// (CloserConfig.RunRetention, the executor's order.close.runRetention).
const DefaultRunRetention = 7 * 24 * time.Hour

// runPurgeBatch bounds the old records one run deletes: a run every second
// writes one and deletes up to this many, so the table stays at its
// retention without a job of its own.
const runPurgeBatch = 100

// RunRecord is what a close run writes to order_close_run when it ends
// (package inspect reads it back, with the row's id and finish time, as
// inspect.CloseRun). Times are the database session's wall clock, like
// order_info's; the db tags are the inserts' named parameters.
type RunRecord struct {
	StartedAt     time.Time `db:"started_at"`
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

// recordRun writes the run's record and deletes a few expired ones. It runs
// under its own deadline and without ctx's cancellation: a run stopped by
// shutdown is recorded too.
func (c *Closer) recordRun(ctx context.Context, opt RunOptions, started time.Time, st RunStats, runErr error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r := RunRecord{StartedAt: started, Host: sqlexec.Truncate(c.cfg.Host, 64), Source: sqlexec.Truncate(opt.Source, 64),
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
	r := RunRecord{StartedAt: started, Host: sqlexec.Truncate(c.cfg.Host, 64), Source: sqlexec.Truncate(opt.Source, 64),
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
