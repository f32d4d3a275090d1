package handlers

import (
	"context"
	"fmt"

	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/xxljob"
)

// OrderAutoConfirmUnits is OrderAutoConfirm over units: order tables of
// order databases (order.sources), each with its Jobs, shared out and run
// as orderTimeoutCloseJob's units are (lifecycle.Sweep). With one unit it
// is OrderAutoConfirm of it, logged as it always was.
func OrderAutoConfirmUnits(units ...*lifecycle.Jobs) xxljob.Handler {
	if len(units) == 1 {
		return OrderAutoConfirm(units[0])
	}
	return lifecycleSweepHandler(OrderAutoConfirmJob, paramAutoConfirmDays, lifecycle.JobAutoConfirm, "completed", units)
}

// OrderFulfillmentTimeoutUnits is OrderFulfillmentTimeout over units, as
// OrderAutoConfirmUnits is OrderAutoConfirm.
func OrderFulfillmentTimeoutUnits(units ...*lifecycle.Jobs) xxljob.Handler {
	if len(units) == 1 {
		return OrderFulfillmentTimeout(units[0])
	}
	return lifecycleSweepHandler(OrderFulfillmentTimeoutJob, paramFulfillmentTimeoutDays, lifecycle.JobFulfillmentTimeout, "flagged", units)
}

// lifecycleSweepHandler runs job over units: every line of the run log
// names its unit (source/table); a unit that fails is reported with what
// stopped it and fails the run, after the other units have finished.
func lifecycleSweepHandler(name, daysKey, job, verb string, units []*lifecycle.Jobs) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		sweep, err := lifecycle.NewSweep(units...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		opt, err := lifecycleOptions(req.Param, daysKey)
		if err != nil {
			return err
		}
		opt.ShardIndex, opt.ShardTotal = req.ShardIndex, max(req.ShardTotal, 1)
		req.Logf("%s executor %d/%d over %d units days=%s pageSize=%d maxOrders=%d%s", name, opt.ShardIndex, opt.ShardTotal,
			len(units), daysOf(opt), units[0].PageSize(opt.PageSize), opt.MaxOrders, dryRunNote(opt.DryRun))
		res, err := sweep.Run(ctx, job, lifecycle.SweepOptions{Options: opt,
			UnitProgress: func(u lifecycle.UnitRun, p lifecycle.Page) {
				req.Logf("%s%s page %d: scanned=%d %s=%d skipped=%d elapsed=%s",
					u.Name(), shareOf(u.Share), p.Page, p.Scanned, verb, p.Changed, p.Skipped, p.Elapsed.Round(1e6))
			},
			UnitDone: func(u lifecycle.UnitRun) {
				if u.Started && u.Stats.Pages > 0 {
					req.Logf("%s%s due: at or before %s (database time %s minus %d days)", u.Name(), shareOf(u.Share),
						u.Stats.Cutoff.Format(oplist.WallTimeLayout), u.Stats.Now.Format(oplist.WallTimeLayout), u.Stats.Days)
				}
				logUnit(req, u)
			},
		})
		if err != nil {
			return err
		}
		if len(res.Units) == 0 {
			req.Logf("no unit for executor %d of %d", opt.ShardIndex, opt.ShardTotal)
		}
		summary := res.Total.String() + fmt.Sprintf(" units=%d", len(res.Units))
		if failed := res.Failed(); len(failed) > 0 {
			summary += fmt.Sprintf(" failed_units=%d", len(failed))
		}
		req.Logf("%s", summary)
		if err := res.Err(); err != nil {
			return fmt.Errorf("%s: %w", summary, err)
		}
		req.SetResult(summary)
		return nil
	})
}

// daysOf writes a run's days: its override, or "configured".
func daysOf(opt lifecycle.Options) string {
	if opt.Days > 0 {
		return fmt.Sprint(opt.Days)
	}
	return "configured"
}
