package handlers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// OrderTimeoutCloseJob closes unpaid orders past their payment deadline.
const OrderTimeoutCloseJob = "orderTimeoutCloseJob"

// Job param keys of orderTimeoutCloseJob.
const (
	paramPageSize     = "pageSize"
	paramMaxOrders    = "maxOrders"
	paramMaxPerSecond = "maxPerSecond"
	paramDryRun       = "dryRun"
)

// closeOptions parses the job param of orderTimeoutCloseJob.
func closeOptions(param string) (orders.RunOptions, error) {
	p, err := parseParams(param, paramPageSize, paramMaxOrders, paramMaxPerSecond, paramDryRun)
	if err != nil {
		return orders.RunOptions{}, err
	}
	var o orders.RunOptions
	if o.PageSize, o.MaxOrders, err = p.pageKeys(paramMaxOrders); err != nil {
		return o, err
	}
	if o.MaxPerSecond, err = p.floatKey(paramMaxPerSecond, 0, 0, 1e6); err != nil {
		return o, err
	}
	if o.DryRun, err = p.boolKey(paramDryRun, false); err != nil {
		return o, err
	}
	return o, nil
}

// OrderTimeoutClose returns the orderTimeoutCloseJob handler. It logs one
// progress line per page (the admin UI shows them while it runs) and ends
// with the summary line, which is also the result message. A run that
// dead-lettered orders finishes the rest and then fails, so the admin's
// alarm fires; a run that only skipped succeeds.
//
// Given several units (order tables of order databases, each with its
// Closer), one run covers this executor's share of all of them
// (OrderTimeoutCloseUnits).
func OrderTimeoutClose(c *orders.Closer) xxljob.Handler { return OrderTimeoutCloseUnits(c) }

// runOptions are the run's options from its request (the job param, the
// executor's shard, what started it) as effective, the Closer's or the
// Sweep's Effective, completes and checks them.
func runOptions(req *xxljob.Request, effective func(orders.RunOptions) (orders.RunOptions, error)) (orders.RunOptions, error) {
	opt, err := closeOptions(req.Param)
	if err != nil {
		return opt, err
	}
	opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
	opt.Source = runSource(req)
	if req.JobID > 0 {
		opt.LogID = req.LogID
	}
	return effective(opt)
}

// runUnit is a run of one unit: the Closer's Run, its page lines and
// summary, as the job has always logged them.
func runUnit(ctx context.Context, req *xxljob.Request, c *orders.Closer) error {
	opt, err := runOptions(req, c.Effective)
	if err != nil {
		return err
	}
	opt.Progress = func(p orders.PageStats) {
		req.Logf("page %d: scanned=%d closed=%d skipped=%d failed=%d elapsed=%s",
			p.Page, p.Scanned, p.Closed, p.Skipped, p.Failed, p.Elapsed.Round(1e6))
	}
	req.Logf("orderTimeoutCloseJob shard %d/%d pageSize=%d maxOrders=%d maxPerSecond=%g%s",
		opt.ShardIndex, opt.ShardTotal, opt.PageSize, opt.MaxOrders, opt.MaxPerSecond, dryRunNote(opt.DryRun))

	stats, err := c.Run(ctx, opt)
	summary := summarize(req, stats)
	req.Logf("%s", stats.String())
	if err != nil {
		return stopped(req, summary, err)
	}
	if stats.DeadLettered > 0 {
		return fmt.Errorf("%s: %d order(s) could not be closed and went to order_dead_letter", summary, stats.DeadLettered)
	}
	req.SetResult(summary)
	return nil
}

// summarize logs what stats hold beyond the summary line's counts (Redis,
// payment-side and conflict trouble) and returns that line with a field
// for each.
func summarize(req *xxljob.Request, stats orders.RunStats) string {
	summary := stats.String()
	if stats.LockErrors > 0 {
		logAt(req, slog.LevelWarn, "could not reach Redis for %d order lock(s) (%v): those orders were skipped, not closed; "+
			"the next run retries them", stats.LockErrors, stats.LockErr)
		summary += fmt.Sprintf(" lock_errors=%d", stats.LockErrors)
	}
	if stats.TradeErrors > 0 {
		req.Logf("the payment side did not confirm the close of %d order(s) (%v): they stay open; the next run retries them", stats.TradeErrors, stats.TradeErr)
		summary += fmt.Sprintf(" trade_errors=%d", stats.TradeErrors)
	}
	if stats.Conflicts > 0 {
		req.Logf("%d close transaction(s) rolled back because other transactions held or changed their rows (deadlock, lock wait, or a cluster certification conflict): retried, or the orders left to the next run", stats.Conflicts)
		summary += fmt.Sprintf(" conflicts=%d", stats.Conflicts)
	}
	if stats.TradePaid > 0 {
		req.Logf("the payment side reports %d order(s) paid: not closed; their payment notifications are awaited", stats.TradePaid)
	}
	return summary
}

// runSource says in the run's record what started it: the admin's log id
// (the run's log in the admin UI), or a run without the admin (executor
// run, whose requests carry no job id).
func runSource(req *xxljob.Request) string {
	if req.JobID > 0 {
		return adminSource(req.LogID)
	}
	return "executor run"
}

func adminSource(logID int64) string { return fmt.Sprintf("xxl-job log %d", logID) }

// RecordInterrupted returns the executor's InterruptedFunc: an
// orderTimeoutCloseJob run that an earlier process started and never
// finished (it wrote no close-run record) gets its record now, failed with
// the executor's message (orders.Closer.RecordInterrupted). Other handlers'
// runs keep no records of their own.
func RecordInterrupted(c *orders.Closer) func(context.Context, xxljob.InterruptedRun) error {
	return func(ctx context.Context, run xxljob.InterruptedRun) error {
		if run.Handler != OrderTimeoutCloseJob {
			return nil
		}
		// The run had got past its parameters: a bad one fails before
		// anything starts. Whatever they are, the run is recorded.
		opt, _ := closeOptions(run.Param)
		opt.ShardIndex, opt.ShardTotal = run.ShardIndex, run.ShardTotal
		opt.Source, opt.LogID = adminSource(run.LogID), run.LogID
		return c.RecordInterrupted(ctx, opt, run.StartedAt, run.Msg)
	}
}

// stopped reports a run that an error stopped: the error, and what to do
// about it when dbserver.Hint knows (a missing table, a privilege, a read-only
// server). Such an error is never an order's fault: nothing was
// dead-lettered for it and the next run tries the same orders again.
func stopped(req *xxljob.Request, summary string, err error) error {
	hint := dbserver.Hint(err)
	if hint == "" {
		req.Logf("run stopped by an error: %v", err)
		return fmt.Errorf("%s: %w", summary, err)
	}
	req.Logf("run stopped by an error about the database, not about an order (nothing was dead-lettered; the next run tries again): %v", err)
	req.Logf("hint: %s", hint)
	return fmt.Errorf("%s: %w (hint: %s)", summary, err, hint)
}
