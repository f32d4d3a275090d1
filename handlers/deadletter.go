package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// DeadLetterRetryJob retries the closes recorded in order_dead_letter once
// their backoff has run out (cron-triggered, optionally SHARDING_BROADCAST).
const DeadLetterRetryJob = "deadLetterRetryJob"

// Job param keys of deadLetterRetryJob (pageSize and dryRun as for the close
// job).
const paramMaxLetters = "maxLetters"

// retryOptions parses the job param of deadLetterRetryJob.
func retryOptions(param string) (orders.RetryOptions, error) {
	p, err := parseParams(param, paramPageSize, paramMaxLetters, paramDryRun)
	if err != nil {
		return orders.RetryOptions{}, err
	}
	var o orders.RetryOptions
	if o.PageSize, o.MaxLetters, err = p.pageKeys(paramMaxLetters); err != nil {
		return o, err
	}
	if o.DryRun, err = p.boolKey(paramDryRun, false); err != nil {
		return o, err
	}
	return o, nil
}

// errNotConfigured: a handler registered without its domain object (Deps
// built for another purpose).
var errNotConfigured = errors.New("this executor was started without what the handler needs (see handlers.Deps)")

// DeadLetterRetry returns the deadLetterRetryJob handler: in its shard (a
// hash of the letter id, shard.Of(id, broadcastTotal) = broadcastIndex) it
// replays the close of
// every waiting dead letter whose next retry time has come (database
// clock), and ends with the summary line as the result. Letters that fail
// again are rescheduled with a longer backoff and do not fail the run; a run
// that parked letters (maximum attempts reached, or the order is gone) fails
// after finishing the rest, so the admin's alarm tells a person to look.
func DeadLetterRetry(c *orders.Closer) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		if c == nil {
			return fmt.Errorf("%s: %w", DeadLetterRetryJob, errNotConfigured)
		}
		opt, err := retryRunOptions(req, "shard")
		if err != nil {
			return err
		}
		st, err := c.RetryDeadLetters(ctx, opt)
		summary := retrySummary(req, st)
		req.Logf("%s", st.String())
		if err != nil {
			return stopped(req, summary, err)
		}
		return retryResult(req, summary, st)
	})
}

// DeadLetterRetryUnits returns the deadLetterRetryJob handler over units:
// order tables of order databases (order.sources), each with its Closer.
// Each source database keeps its own letters, and each letter names its
// table; a run retries this executor's share of every unit's letters
// (orders.Sweep.RetryDeadLetters: units shared as the close shares them,
// each source on a goroutine of its own). The run log names each unit
// (source/table); a unit that fails (its database down, its table
// missing) is reported with what stopped it and fails the run after the
// other units have finished, as parked letters do. With one unit it is
// DeadLetterRetry.
func DeadLetterRetryUnits(units ...*orders.Closer) xxljob.Handler {
	if len(units) == 1 {
		return DeadLetterRetry(units[0])
	}
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		sweep, err := orders.NewSweep(units...)
		if err != nil {
			return err
		}
		opt, err := retryRunOptions(req, fmt.Sprintf("over %d units, executor", len(units)))
		if err != nil {
			return err
		}
		res := sweep.RetryDeadLetters(ctx, opt, logUnitOf[orders.RetryStats](req))
		if len(res.Units) == 0 {
			req.Logf("no unit for executor %d of %d", opt.ShardIndex, max(opt.ShardTotal, 1))
		}
		summary := retrySummary(req, res.Total) + fmt.Sprintf(" units=%d", len(res.Units))
		if failed := res.Failed(); len(failed) > 0 {
			summary += fmt.Sprintf(" failed_units=%d", len(failed))
		}
		req.Logf("%s", summary)
		if err := res.Err(); err != nil {
			return fmt.Errorf("%s: %w", summary, err)
		}
		return retryResult(req, summary, res.Total)
	})
}

// retryRunOptions parses the job param and logs the run's first line;
// what names this executor's part (shard, or the units and executor).
func retryRunOptions(req *xxljob.Request, what string) (orders.RetryOptions, error) {
	opt, err := retryOptions(req.Param)
	if err != nil {
		return opt, err
	}
	opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
	req.Logf("%s %s %d/%d pageSize=%d maxLetters=%d%s", DeadLetterRetryJob, what,
		opt.ShardIndex, max(opt.ShardTotal, 1), cmp.Or(opt.PageSize, orders.DefaultRetryPageSize), opt.MaxLetters, dryRunNote(opt.DryRun))
	return opt, nil
}

// retrySummary is the run's result line, with what was left for the next
// run because of an error, and logs what the line alone does not say.
func retrySummary(req *xxljob.Request, st orders.RetryStats) string {
	summary := st.String()
	if st.SkipErrors > 0 {
		req.Logf("%d letter(s) left for the next run because of an error (Redis or the payment side), e.g. %v", st.SkipErrors, st.SkipErr)
		summary += fmt.Sprintf(" skip_errors=%d", st.SkipErrors)
	}
	if st.Failed > 0 {
		req.Logf("%d close(s) failed again and will be retried after their backoff (see `executor deadletter list -status waiting`)", st.Failed)
	}
	return summary
}

// retryResult ends a run that went through: it fails when letters were
// parked (a person must look), else sets the summary as the result.
func retryResult(req *xxljob.Request, summary string, st orders.RetryStats) error {
	if st.Parked > 0 {
		return fmt.Errorf("%s: %d dead letter(s) parked for a person (see `executor deadletter list -status parked`)", summary, st.Parked)
	}
	req.SetResult(summary)
	return nil
}
