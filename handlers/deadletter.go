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
	if o.PageSize, err = p.intKey(paramPageSize, 0, 1, 5000); err != nil {
		return o, err
	}
	if o.MaxLetters, err = p.intKey(paramMaxLetters, 0, 0, 1<<30); err != nil {
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
		opt, err := retryOptions(req.Param)
		if err != nil {
			return err
		}
		opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
		mode := ""
		if opt.DryRun {
			mode = " (dry run: nothing is changed)"
		}
		req.Logf("%s shard %d/%d pageSize=%d maxLetters=%d%s", DeadLetterRetryJob,
			opt.ShardIndex, max(opt.ShardTotal, 1), cmp.Or(opt.PageSize, orders.DefaultRetryPageSize), opt.MaxLetters, mode)

		st, err := c.RetryDeadLetters(ctx, opt)
		summary := st.String()
		if st.SkipErrors > 0 {
			req.Logf("%d letter(s) left for the next run because of an error (Redis or the payment side), e.g. %v", st.SkipErrors, st.SkipErr)
			summary += fmt.Sprintf(" skip_errors=%d", st.SkipErrors)
		}
		if st.Failed > 0 {
			req.Logf("%d close(s) failed again and will be retried after their backoff (see `executor deadletter list -status waiting`)", st.Failed)
		}
		req.Logf("%s", st.String())
		if err != nil {
			return stopped(req, summary, err)
		}
		if st.Parked > 0 {
			return fmt.Errorf("%s: %d dead letter(s) parked for a person (see `executor deadletter list -status parked`)", summary, st.Parked)
		}
		req.SetResult(summary)
		return nil
	})
}
