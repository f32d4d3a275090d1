package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
)

// This file holds the payment step of a close: before a page's transaction,
// the trade of every locked, still unpaid and due order is closed at the
// payment side, so that the user cannot pay an order while (or after) we
// close it. WeChat Pay's and Alipay's close-trade calls do this;
// payment.HTTPTradeCloser calls the merchant's own payment service,
// which fronts them.
//
// The step is off unless CloserConfig.TradeCloser is set: with it off the
// close path makes no call and no extra database round trip.

// TradeCloser closes an order's trade at the payment side. It must be
// idempotent (the close job calls it again for an order whose close did not
// commit) and safe for concurrent use (a page's calls run in parallel).
type TradeCloser interface {
	// CloseTrade closes orderNo's trade. A nil error comes with one of the
	// TradeResult values; an error leaves the order unpaid and open, for the
	// next pass.
	CloseTrade(ctx context.Context, orderNo string) (TradeResult, error)
}

// TradeResult is the payment side's answer to a close-trade call.
type TradeResult int

// Trade results.
const (
	// TradeClosed: the trade is closed (now or before); the payment side
	// accepts no payment for the order from now on. The order is closed.
	TradeClosed TradeResult = iota + 1
	// TradeAlreadyPaid: the user has paid; the payment's notification
	// (payment.Service.Pay) is on its way. The close is skipped
	// (RunStats.TradePaid, counted in SkippedPaid) and logged; the order
	// stays unpaid here until Pay runs.
	TradeAlreadyPaid
	// TradeNotFound: the payment side has no trade for the order (the user
	// never started paying) and will open none for it from now on. The order
	// is closed.
	TradeNotFound
)

func (r TradeResult) String() string {
	switch r {
	case TradeClosed:
		return "closed"
	case TradeAlreadyPaid:
		return "already_paid"
	case TradeNotFound:
		return "not_found"
	}
	return "unknown"
}

func (r TradeResult) valid() bool { return r >= TradeClosed && r <= TradeNotFound }

// NopTradeCloser answers TradeClosed without calling anything. A Closer
// given one (or none) skips the payment step altogether.
type NopTradeCloser struct{}

// CloseTrade returns TradeClosed.
func (NopTradeCloser) CloseTrade(context.Context, string) (TradeResult, error) {
	return TradeClosed, nil
}

// defaultTradeFanOut is how many close-trade calls of a page run at once.
const defaultTradeFanOut = 16

// fillExtensions checks and defaults the payment-step and compensation
// fields of cfg.
func (cfg *CloserConfig) fillExtensions() error {
	if _, nop := cfg.TradeCloser.(NopTradeCloser); nop {
		cfg.TradeCloser = nil
	}
	cfg.TradeFanOut = cmp.Or(cfg.TradeFanOut, defaultTradeFanOut)
	if cfg.TradeFanOut < 1 || cfg.TradeFanOut > 256 {
		return fmt.Errorf("orders: trade fan-out %d out of [1, 256]", cfg.TradeFanOut)
	}
	switch cfg.Compensation {
	case CompensateLocal, CompensateOutbox:
	default:
		return fmt.Errorf("orders: unknown compensation mode %d", cfg.Compensation)
	}
	return nil
}

// maxLoggedOrders caps the order numbers a page's log line lists.
const maxLoggedOrders = 20

// closeTrades runs the payment step for the locked orders of a page and
// returns the rows the close transaction should handle: those whose trade is
// closed (or unknown to the payment side), and those no longer unpaid and
// due, which the transaction skips and counts as it always does. Orders the
// payment side reports paid are counted as skipped (paid); orders whose call
// failed, or did not answer while the locks left enough time for the
// transaction, are counted as skipped (locked) and left to the next pass.
//
// The orders are re-read (without locks) first, so that orders paid, closed
// or given a longer timeout since the scan are not closed at the payment
// side. Calls run at most TradeFanOut at once, all under a deadline of half
// the lock TTL before the lease ends; the function returns when all have.
// The error is a failed read of the orders.
func (c *Closer) closeTrades(ctx context.Context, clock runClock, rows []scanRow, lease *orderlock.Lease, res *pageResult) ([]scanRow, error) {
	call, err := c.openTrades(ctx, clock, rows)
	if err != nil {
		return nil, err
	}
	if len(call) == 0 {
		return rows, nil
	}
	results, errs := c.callTrades(ctx, rows, call, lease)
	drop := c.tallyTrades(ctx, rows, call, results, errs, res)
	if len(drop) == 0 {
		return rows, nil
	}
	out := make([]scanRow, 0, len(rows)-len(drop))
	for i, r := range rows {
		if !drop[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

// openTrades re-reads the orders of rows without locks and returns the
// indexes (into rows) of those still unpaid and due: the ones whose trade
// the payment side is asked to close.
func (c *Closer) openTrades(ctx context.Context, clock runClock, rows []scanRow) ([]int, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	cur, err := c.store.readOrders(ctx, c.db, ids)
	if err != nil {
		return nil, err
	}
	open := make(map[int64]bool, len(cur))
	for _, o := range cur {
		if o.Status == orderstatus.Unpaid && o.due(clock.shop) {
			open[o.ID] = true
		}
	}
	var call []int
	for i, r := range rows {
		if open[r.ID] {
			call = append(call, i)
		}
	}
	return call, nil
}

// callTrades closes the trades of rows[call[k]], at most TradeFanOut at
// once, under a deadline of half the lock TTL before the lease ends, and
// returns each call's answer and error (by k) once all have returned.
func (c *Closer) callTrades(ctx context.Context, rows []scanRow, call []int, lease *orderlock.Lease) ([]TradeResult, []error) {
	tctx, cancel := context.WithDeadline(ctx, lease.Until().Add(-c.locker.TTL()/2))
	defer cancel()
	results := make([]TradeResult, len(call))
	errs := make([]error, len(call))
	var g errgroup.Group
	g.SetLimit(c.cfg.TradeFanOut)
	for k, i := range call {
		g.Go(func() error {
			results[k], errs[k] = c.closeTrade(tctx, rows[i].OrderNo)
			return nil
		})
	}
	_ = g.Wait()
	return results, errs
}

// tallyTrades counts the payment side's answers into res, logs the orders
// it reported paid and those whose call failed, and returns the indexes
// (into rows) of both: the orders this page does not close.
func (c *Closer) tallyTrades(ctx context.Context, rows []scanRow, call []int, results []TradeResult, errs []error, res *pageResult) map[int]bool {
	drop := make(map[int]bool)
	var paidNos, failedNos []string
	var firstErr error
	for k, i := range call {
		switch {
		case errs[k] != nil:
			drop[i] = true
			res.locked++
			res.tradeErrors++
			res.detail.setErr(rows[i].OrderNo, OutcomeSkippedLocked, fmt.Errorf("payment side: %w", errs[k]))
			failedNos = append(failedNos, rows[i].OrderNo)
			if firstErr == nil {
				firstErr = errs[k]
			}
		case results[k] == TradeAlreadyPaid:
			drop[i] = true
			res.paid++
			res.tradePaid++
			res.detail.set(rows[i].OrderNo, OutcomeSkippedPaid)
			paidNos = append(paidNos, rows[i].OrderNo)
		}
	}
	if firstErr != nil && res.tradeErr == nil {
		res.tradeErr = firstErr
	}
	if len(paidNos) > 0 {
		c.log.InfoContext(ctx, "payment side reports orders paid; their close is skipped until the payment is recorded",
			"num_orders", len(paidNos), "order_nos", paidNos[:min(len(paidNos), maxLoggedOrders)])
	}
	if len(failedNos) > 0 {
		c.log.WarnContext(ctx, "close-trade calls failed; orders left to the next pass",
			"num_orders", len(failedNos), "order_nos", failedNos[:min(len(failedNos), maxLoggedOrders)],
			"error", firstErr.Error())
	}
	return drop
}

// closeTrade calls the TradeCloser once for orderNo, turning a panic or an
// answer outside the contract into an error.
func (c *Closer) closeTrade(ctx context.Context, orderNo string) (res TradeResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = 0, fmt.Errorf("close trade of order %s: panic: %v", orderNo, p)
		}
	}()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("close trade of order %s: no time left under the order lock: %w", orderNo, context.Cause(ctx))
	}
	res, err = c.cfg.TradeCloser.CloseTrade(ctx, orderNo)
	switch {
	case err != nil:
		return 0, err
	case !res.valid():
		return 0, fmt.Errorf("close trade of order %s: answer %d is not a TradeResult", orderNo, res)
	}
	return res, nil
}

// tradeStepOne is the payment step of CloseOrder. done reports that the
// close ends here, with out and err: the payment side reported the order
// paid (OutcomeSkippedPaid) or the call failed (OutcomeSkippedLocked with
// the error, so a delayed task retries). Without a TradeCloser it does
// nothing.
func (c *Closer) tradeStepOne(ctx context.Context, clock runClock, o orderRow, lease *orderlock.Lease) (out Outcome, done bool, err error) {
	if c.cfg.TradeCloser == nil {
		return 0, false, nil
	}
	var pr pageResult
	rows, err := c.closeTrades(ctx, clock, []scanRow{o.scanRow}, lease, &pr)
	switch {
	case err != nil:
		return 0, true, err
	case len(rows) > 0:
		return 0, false, nil
	case pr.tradePaid > 0:
		return OutcomeSkippedPaid, true, nil
	default:
		return OutcomeSkippedLocked, true, fmt.Errorf("close order %s: payment side: %w", o.OrderNo, cmp.Or(pr.tradeErr, errors.New("no answer")))
	}
}
