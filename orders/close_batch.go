package orders

import (
	"context"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/orderstatus"
)

// This file holds CloseOrders, the batch form of CloseOrder for callers that
// hold many order numbers at once (the delayed-task dispatcher's batch
// handler): one database clock read, one read of the orders and one of
// their lines, one lock pipeline and one close transaction per batch, through the same page
// machinery as Run (closePage: guarded, then checked, then one order at a
// time; dead letters), instead of all of it once per order.

// CloseOrders closes the given orders, each only if it is due by the
// database clock, and returns one outcome per element of orderNos, in the
// order given, with the meaning CloseOrder gives it: OutcomeClosed,
// OutcomeNotDue (left as it is), OutcomeSkippedPaid, OutcomeSkippedClosed,
// OutcomeNotFound, OutcomeParked (its close dead letter is parked),
// OutcomeSkippedLocked (lock held elsewhere, Redis failing, payment-side call
// failed, or the lease ran out before commit) and OutcomeDeadLettered (the
// close failed and is recorded in order_dead_letter). As with CloseOrder, a
// waiting dead letter is retried now, since the caller asked for the order.
//
// The orders are handled in batches of CloserConfig.PageSize: the due,
// unpaid, unparked ones of a batch are locked in one pipeline and closed in
// one transaction, with the same lock order, status CAS, compensation,
// lease check and per-order fallback as a page of Run, so one bad order
// never holds back the others. An order number given more than once is
// handled once and every occurrence gets its outcome.
//
// Each Result carries, beside the outcome, how long a not-due order has
// left (DueIn) and the cause of a dead letter or of a skip that a failure
// rather than another holder caused (Err). The error is for failures beyond
// single orders (the database unreachable, a table or privilege missing, a
// dead letter not written; dbserver.KindOf classifies it and dbserver.NotNow tells whether it
// is about the orders at all); then the outcomes are nil and nothing is said
// about any order: nothing of the failing batch was dead-lettered, orders
// closed before the failure stay closed, and asking again reports them
// skipped_closed.
//
// The Observer sees one PageReport per batch (Single set, as for
// CloseOrder) and the lateness of the orders closed.
func (c *Closer) CloseOrders(ctx context.Context, orderNos []string) ([]Result, error) {
	outs := make([]Result, len(orderNos))
	if len(orderNos) == 0 {
		return outs, nil
	}
	got := make(map[string]Result, len(orderNos))
	seen := make(map[string]bool, len(orderNos))
	distinct := slices.DeleteFunc(slices.Clone(orderNos), func(no string) bool {
		dup := seen[no]
		seen[no] = true
		return dup
	})
	for chunk := range slices.Chunk(distinct, c.cfg.PageSize) {
		// Between batches, cancellation is honoured at once.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.closeBatch(ctx, chunk, got); err != nil {
			return nil, err
		}
	}
	for i, no := range orderNos {
		outs[i] = got[no]
	}
	return outs, nil
}

// orderCtxKey keys the function WithOrderContexts sets.
type orderCtxKey struct{}

// WithOrderContexts returns ctx carrying of, which gives the context the
// close path logs with about one order (its dead-lettering, its lease
// running out), rather than about a whole page: a caller closing orders on
// behalf of several requests (the delayed-task batch handler, whose tasks
// each have a trace id) maps each order number to its request's context.
// The contexts are only used for logging. of must be safe for concurrent
// use; nil means ctx.
func WithOrderContexts(ctx context.Context, of func(orderNo string) context.Context) context.Context {
	return context.WithValue(ctx, orderCtxKey{}, of)
}

// orderCtx is the context to log with about orderNo: the one
// WithOrderContexts gives, or ctx.
func orderCtx(ctx context.Context, orderNo string) context.Context {
	of, ok := ctx.Value(orderCtxKey{}).(func(string) context.Context)
	if !ok || of == nil {
		return ctx
	}
	if oc := of(orderNo); oc != nil {
		return oc
	}
	return ctx
}

// pageDetail collects the outcome of each order of a page that closePage
// decides, for CloseOrders (Run passes none: a nil *pageDetail records
// nothing). Only one goroutine writes to it at a time.
type pageDetail struct {
	out map[string]Result
}

// set records no's outcome; on a nil receiver it does nothing.
func (d *pageDetail) set(no string, o Outcome) { d.setErr(no, o, nil) }

// setErr records no's outcome and its cause; on a nil receiver it does
// nothing.
func (d *pageDetail) setErr(no string, o Outcome, err error) {
	if d != nil {
		d.out[no] = Result{Outcome: o, Err: err}
	}
}

// setOne records the outcome of closeOne.
func (d *pageDetail) setOne(no string, r oneResult) {
	err := r.cause
	if r.leaseLost {
		err = ErrLeaseExpired
	}
	d.setErr(no, r.outcome, err)
}

// closeBatch closes one batch of distinct order numbers (at most a page) and
// records every one's outcome in got.
func (c *Closer) closeBatch(ctx context.Context, nos []string, got map[string]Result) error {
	clock, _, err := c.readClock(ctx)
	if err != nil {
		return err
	}
	rows, err := c.store.ordersForClose(ctx, c.db, nos)
	if err != nil {
		return err
	}
	byNo := make(map[string]batchOrder, len(rows))
	for _, o := range rows {
		byNo[o.OrderNo] = o
	}
	// The first look, without locks, as CloseOrder's: the close transaction
	// reads each order again under its row lock.
	var due []scanRow
	var pd pageData
	for _, no := range nos {
		o, ok := byNo[no]
		switch {
		case !ok:
			got[no] = Result{Outcome: OutcomeNotFound}
		case o.Status == orderstatus.Paid:
			got[no] = Result{Outcome: OutcomeSkippedPaid}
		case o.Status != orderstatus.Unpaid:
			got[no] = Result{Outcome: OutcomeSkippedClosed}
		case !o.due(clock.shop):
			got[no] = Result{Outcome: OutcomeNotDue, DueIn: o.deadline().Sub(clock.shop)}
		case o.LetterStatus == deadletters.Parked:
			got[no] = Result{Outcome: OutcomeParked}
		default:
			due = append(due, o.scanRow)
			if o.LetterStatus == deadletters.Waiting {
				if pd.letters == nil {
					pd.letters = map[string]bool{}
				}
				pd.letters[no] = true
			}
		}
	}
	var pr pageResult
	if len(due) > 0 {
		if pd.items, err = c.pageItems(ctx, due); err != nil {
			return err
		}
		detail := &pageDetail{out: make(map[string]Result, len(due))}
		lease, lerr := c.lock(ctx, due)
		pr, err = c.closePage(ctx, clock, page{rows: due, pageData: pd, lease: lease, lerr: lerr, detail: detail})
		if err != nil {
			return err
		}
		// closePage records what it decides; an order it did not decide was
		// not locked (held elsewhere, or Redis failed): skipped_locked, for
		// a later pass.
		for _, r := range due {
			res, ok := detail.out[r.OrderNo]
			if !ok {
				res = Result{Outcome: OutcomeSkippedLocked}
				if lease.Failed(r.OrderNo) {
					res.Err = lerr
				}
			}
			got[r.OrderNo] = res
		}
	}
	c.observeBatch(ctx, nos, got, pr)
	return nil
}

// observeBatch reports a CloseOrders batch as one page.
func (c *Closer) observeBatch(ctx context.Context, nos []string, got map[string]Result, pr pageResult) {
	if c.cfg.Observer == nil {
		return
	}
	p := PageReport{Source: c.Source(), Table: c.Table(), ShardTotal: 1, Single: true, Scanned: len(nos), LockErrors: pr.lockErrors, LeaseLost: pr.leaseLost}
	for _, no := range nos {
		switch got[no].Outcome {
		case OutcomeClosed:
			p.Closed++
		case OutcomeDeadLettered:
			p.DeadLettered++
		case OutcomeSkippedPaid:
			p.SkippedPaid++
		case OutcomeSkippedLocked:
			p.SkippedLocked++
		case OutcomeNotDue:
			p.SkippedNotDue++
		case OutcomeParked:
			p.SkippedParked++
		default: // closed before, not found
			p.SkippedClosed++
		}
	}
	c.cfg.Observer.ClosePage(ctx, p)
}

// batchOrder is an order as CloseOrders first sees it, with the status of
// its close dead letter ("" for none).
type batchOrder struct {
	orderRow
	LetterStatus string `db:"letter_status"`
}

// ordersForClose runs closesql.Statements.OrdersForClose.
func (s store) ordersForClose(ctx context.Context, q sqlx.QueryerContext, orderNos []string) ([]batchOrder, error) {
	return selectIn[batchOrder](ctx, q, s.sql().OrdersForClose, orderNos, "read %d orders")
}
