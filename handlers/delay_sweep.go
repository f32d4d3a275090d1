package handlers

import (
	"context"
	"fmt"

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

// DelayTaskSweep returns the delayTaskSweepJob handler: in its shard
// (broadcastIndex/Total over task ids) it recovers tasks stuck RUNNING and
// runs PENDING tasks due for longer than the dispatcher's SweepGrace, then
// reports a summary line as the result. A run in which tasks failed for
// good (now FAILED) finishes the rest and then fails, so the admin's alarm
// fires; tasks that only failed an attempt (retried later) do not.
func DelayTaskSweep(d *delay.Dispatcher) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		opt, err := delaySweepOptions(req.Param)
		if err != nil {
			return err
		}
		opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
		req.Logf("delayTaskSweepJob shard %d/%d limit=%d", opt.ShardIndex, max(opt.ShardTotal, 1), opt.Limit)
		res, err := d.Sweep(ctx, opt)
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
