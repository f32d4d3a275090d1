package handlers

import (
	"context"
	"fmt"

	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/xxljob"
)

// Handler names of the order lifecycle jobs.
const (
	// OrderAutoConfirmJob completes shipped orders after auto_confirm_days.
	OrderAutoConfirmJob = "orderAutoConfirmJob"
	// OrderFulfillmentTimeoutJob flags paid orders not shipped within
	// fulfillment_timeout_days.
	OrderFulfillmentTimeoutJob = "orderFulfillmentTimeoutJob"
)

// Job param keys of the lifecycle jobs (pageSize, maxOrders and dryRun as
// for the close job).
const (
	paramAutoConfirmDays        = "autoConfirmDays"
	paramFulfillmentTimeoutDays = "fulfillmentTimeoutDays"
)

// lifecycleOptions parses the job param of a lifecycle job whose day
// override is daysKey.
func lifecycleOptions(param, daysKey string) (lifecycle.Options, error) {
	p, err := parseParams(param, daysKey, paramPageSize, paramMaxOrders, paramDryRun)
	if err != nil {
		return lifecycle.Options{}, err
	}
	var o lifecycle.Options
	if o.Days, err = p.intKey(daysKey, 0, 1, lifecycle.MaxDays); err != nil {
		return o, err
	}
	if o.PageSize, o.MaxOrders, err = p.pageKeys(paramMaxOrders); err != nil {
		return o, err
	}
	if o.DryRun, err = p.boolKey(paramDryRun, false); err != nil {
		return o, err
	}
	return o, nil
}

// OrderAutoConfirm returns the orderAutoConfirmJob handler: in its shard it
// completes (status 3 → 4) the orders shipped at least auto_confirm_days
// ago (config order.timeout.auto_confirm_days, or the param
// autoConfirmDays), logs one line per page and ends with the summary line
// as the result.
func OrderAutoConfirm(l *lifecycle.Jobs) xxljob.Handler {
	return lifecycleHandler(OrderAutoConfirmJob, paramAutoConfirmDays, "completed", l, (*lifecycle.Jobs).AutoConfirm)
}

// OrderFulfillmentTimeout returns the orderFulfillmentTimeoutJob handler: in
// its shard it flags, once each, the paid orders not shipped within
// fulfillment_timeout_days of payment (config
// order.timeout.fulfillment_timeout_days, or the param
// fulfillmentTimeoutDays) in order_fulfillment_overdue. It changes no order.
func OrderFulfillmentTimeout(l *lifecycle.Jobs) xxljob.Handler {
	return lifecycleHandler(OrderFulfillmentTimeoutJob, paramFulfillmentTimeoutDays, "flagged", l, (*lifecycle.Jobs).FlagOverdue)
}

// withoutLifecycle is h, or, when why is set, a handler failing every run
// with it.
func withoutLifecycle(h xxljob.Handler, name string, why error) xxljob.Handler {
	if why == nil {
		return h
	}
	return xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error { return fmt.Errorf("%s: %w", name, why) })
}

func lifecycleHandler(name, daysKey, verb string, l *lifecycle.Jobs,
	run func(*lifecycle.Jobs, context.Context, lifecycle.Options) (lifecycle.Stats, error)) xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		if l == nil {
			return fmt.Errorf("%s: %w", name, errNotConfigured)
		}
		opt, err := lifecycleOptions(req.Param, daysKey)
		if err != nil {
			return err
		}
		opt.ShardIndex, opt.ShardTotal = req.ShardIndex, req.ShardTotal
		opt.Progress = func(p lifecycle.Page) {
			req.Logf("page %d: scanned=%d %s=%d skipped=%d elapsed=%s",
				p.Page, p.Scanned, verb, p.Changed, p.Skipped, p.Elapsed.Round(1e6))
		}
		req.Logf("%s shard %d/%d days=%s pageSize=%d maxOrders=%d%s", name,
			opt.ShardIndex, max(opt.ShardTotal, 1), daysOf(opt), l.PageSize(opt.PageSize), opt.MaxOrders, dryRunNote(opt.DryRun))

		st, err := run(l, ctx, opt)
		summary := st.String()
		if err == nil || st.Pages > 0 {
			req.Logf("due: at or before %s (database time %s minus %d days)",
				st.Cutoff.Format(oplist.WallTimeLayout), st.Now.Format(oplist.WallTimeLayout), st.Days)
		}
		req.Logf("%s", summary)
		if err != nil {
			return fmt.Errorf("%s: %w", summary, err)
		}
		req.SetResult(summary)
		return nil
	})
}
