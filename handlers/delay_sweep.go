package handlers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/xxljob"
)

// DelayTaskSweepJob claims and runs delayed tasks the Redis timer missed
// (cron-triggered, usually SHARDING_BROADCAST).
const DelayTaskSweepJob = "delayTaskSweepJob"

// Job param keys of delayTaskSweepJob.
const paramDelaySweepLimit = "limit"

// delaySweepOptions parses the job param of delayTaskSweepJob: optional
// limit=N, the most tasks one run claims (default 1000).
func delaySweepOptions(param string) (delay.SweepOptions, error) {
	p, err := parseParams(param, paramDelaySweepLimit)
	if err != nil {
		return delay.SweepOptions{}, err
	}
	var o delay.SweepOptions
	if o.Limit, err = p.intKey(paramDelaySweepLimit, 1000, 1, 100_000); err != nil {
		return o, err
	}
	return o, nil
}

// SourceDispatcher is the delayed-task dispatcher of an order source
// whose database is not the home database (order.sources): its tasks live
// in that database's table.
type SourceDispatcher struct {
	Source     string
	Dispatcher *delay.Dispatcher
}

// DelayTaskSweep returns the delayTaskSweepJob handler: in its shard
// (broadcastIndex/Total over task ids) it recovers tasks stuck RUNNING and
// runs PENDING tasks due for longer than the dispatcher's SweepGrace, then
// reports a summary line as the result. A run in which tasks failed for
// good (now FAILED) finishes the rest and then fails, so the admin's alarm
// fires; tasks that only failed an attempt (retried later) do not.
//
// With sources (the dispatchers of the other order databases) it sweeps
// the home database and each source's at once, each up to the limit, and
// logs each one's line; the result adds them up. A database that cannot
// be swept fails the run, naming it, after the others were swept.
func DelayTaskSweep(d *delay.Dispatcher, sources ...SourceDispatcher) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		opt, err := delaySweepOptions(req.Param)
		if err != nil {
			return err
		}
		opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
		req.Logf("delayTaskSweepJob shard %d/%d limit=%d", opt.ShardIndex, max(opt.ShardTotal, 1), opt.Limit)
		var res delay.SweepResult
		if len(sources) == 0 {
			res, err = d.Sweep(ctx, opt)
		} else {
			res, err = sweepSources(ctx, req, opt, d, sources)
		}
		summary := res.String()
		req.Logf("%s", summary)
		if err != nil {
			return fmt.Errorf("%s: %w", summary, err)
		}
		if res.Failed > 0 {
			return fmt.Errorf("%s: %d delayed task(s) failed for good (status FAILED; see `executor tasks list -status FAILED`)", summary, res.Failed)
		}
		req.SetResult(summary)
		return nil
	})
}

// sweepSources sweeps the home database (d) and each source's at once,
// so that a database slow to answer holds up no other; it logs a line per
// database, in order, and returns the counts added up, with the error of
// every database that failed, named.
func sweepSources(ctx context.Context, req *xxljob.Request, opt delay.SweepOptions, d *delay.Dispatcher,
	sources []SourceDispatcher) (delay.SweepResult, error) {
	all := append([]SourceDispatcher{{Source: "", Dispatcher: d}}, sources...)
	results := make([]delay.SweepResult, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, s := range all {
		wg.Go(func() { results[i], errs[i] = s.Dispatcher.Sweep(ctx, opt) })
	}
	wg.Wait()
	var total delay.SweepResult
	var failed []error
	for i, s := range all {
		name := "source " + s.Source
		if s.Source == "" {
			name = "home database (mysql.dsn)"
		}
		total.Add(results[i])
		if errs[i] != nil {
			logFailure(req, "%s: FAILED after %s: %v", name, results[i], errs[i])
			failed = append(failed, fmt.Errorf("%s: %w", name, errs[i]))
			continue
		}
		req.Logf("%s: %s", name, results[i])
	}
	return total, errors.Join(failed...)
}
