package handlers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/internal/unitrun"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// OrderTimeoutCloseUnits returns the orderTimeoutCloseJob handler over
// units: order tables of order databases (order.sources), each with its
// Closer, in the configured order. One run covers this executor's share
// of every unit (orders.Sweep: whole units in turn, the rest split by
// rows), each source's units on a goroutine of their own. Every line of
// the run log names its unit (source/table); a unit that fails (its
// database down or read-only, its table missing) is reported with what
// stopped it and fails the run, after the other units have finished.
// With one unit the run is that Closer's Run, logged as it always was.
func OrderTimeoutCloseUnits(units ...*orders.Closer) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		if len(units) == 1 {
			return runUnit(ctx, req, units[0])
		}
		sweep, err := orders.NewSweep(units...)
		if err != nil {
			return err
		}
		return runSweep(ctx, req, sweep)
	})
}

func runSweep(ctx context.Context, req *xxljob.Request, sweep *orders.Sweep) error {
	opt, err := runOptions(req, sweep.Effective)
	if err != nil {
		return err
	}
	req.Logf("orderTimeoutCloseJob executor %d/%d over %d units pageSize=%d maxOrders=%d maxPerSecond=%g%s",
		opt.ShardIndex, opt.ShardTotal, len(sweep.Units()), opt.PageSize, opt.MaxOrders, opt.MaxPerSecond, dryRunNote(opt.DryRun))
	res := sweep.Run(ctx, orders.SweepOptions{RunOptions: opt,
		UnitProgress: func(u orders.UnitRun, p orders.PageStats) {
			req.Logf("%s%s page %d: scanned=%d closed=%d skipped=%d failed=%d elapsed=%s",
				u.Name(), shareOf(u.Share), p.Page, p.Scanned, p.Closed, p.Skipped, p.Failed, p.Elapsed.Round(1e6))
		},
		UnitDone: logUnitOf[orders.RunStats](req),
	})
	if len(res.Units) == 0 {
		req.Logf("no unit for executor %d of %d", opt.ShardIndex, opt.ShardTotal)
	}
	summary := summarize(req, res.Total)
	failed := res.Failed()
	summary += fmt.Sprintf(" units=%d", len(res.Units))
	if len(failed) > 0 {
		summary += fmt.Sprintf(" failed_units=%d", len(failed))
	}
	req.Logf("%s", summary)
	if err := res.Err(); err != nil {
		return fmt.Errorf("%s: %w", summary, err)
	}
	if res.Total.DeadLettered > 0 {
		return fmt.Errorf("%s: %d order(s) could not be closed and went to order_dead_letter", summary, res.Total.DeadLettered)
	}
	req.SetResult(summary)
	return nil
}

// shareOf writes a unit's row share, when it is not the whole unit.
func shareOf(s shard.Share) string {
	if s.Whole() {
		return ""
	}
	return fmt.Sprintf(" (rows of shard %d/%d)", s.RowIndex, s.RowTotal)
}

// logFailure writes a line about a failure into the run log at ERROR.
func logFailure(req *xxljob.Request, format string, args ...any) {
	logAt(req, slog.LevelError, format, args...)
}

// logAt writes a line into the run log at level, so that the admin UI's
// log sets failures (ERROR) and trouble the run went on through (WARN)
// apart from the progress lines at INFO.
func logAt(req *xxljob.Request, level slog.Level, format string, args ...any) {
	if req.Log == nil { // a Request built by hand
		req.Logf(format, args...)
		return
	}
	req.Log.Log(context.Background(), level, fmt.Sprintf(format, args...))
}

// logUnit writes a unit's end into the run log: its summary line, or what
// stopped it and, when dbserver.Hint knows, what to do about it (an error
// about the database, not an order: nothing was dead-lettered for it).
// S is the unit's stats: the close's, the retry's or a lifecycle job's.
func logUnit[S fmt.Stringer](req *xxljob.Request, u unitrun.Run[S]) {
	if u.Err == nil {
		req.Logf("%s%s: %s", u.Name(), shareOf(u.Share), u.Stats)
		return
	}
	if !u.Started {
		logFailure(req, "%s%s FAILED: %v", u.Name(), shareOf(u.Share), u.Err)
		return
	}
	logFailure(req, "%s%s FAILED after %s: %v", u.Name(), shareOf(u.Share), u.Stats, u.Err)
	if hint := dbserver.Hint(u.Err); hint != "" {
		req.Logf("%s hint: %s", u.Name(), hint)
	}
}

// logUnitOf is logUnit for req, as a sweep's callback.
func logUnitOf[S fmt.Stringer](req *xxljob.Request) func(unitrun.Run[S]) {
	return func(u unitrun.Run[S]) { logUnit(req, u) }
}
