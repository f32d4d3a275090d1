package orders

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders/coupon"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
)

// This file holds the close transaction. A page is closed by one of two
// kinds of transaction, the second the one fallback of the first:
//
//   - the guarded close (guardedClose) reads nothing: it trusts what the
//     page's read without locks saw, and every one of its UPDATEs repeats
//     the expected state and must change exactly the expected rows (the
//     status CAS every order of the page, the stock one row per SKU, the
//     coupons one per coupon, or one per order when the coupon names its
//     order, the other givebacks one per key), or it
//     returns errNotAsRead and rolls back. A page's orders are locked in
//     Redis, so another closer or a payment changes one only when its lock
//     ran out, and stock or coupons are short only when data is wrong:
//     almost every page closes this way, with writes only (and, for
//     coupons found by match, the one locking read that counts each
//     order's used rows, or chooses its copy: coupon.GiveBack).
//   - the checked close (checkedClose) locks and reads the orders (by id),
//     skips those no longer unpaid and due with their outcome, locks and
//     checks their stock rows (by key) and coupons, and sets aside the
//     orders whose data is wrong before any write; the rest close with the
//     same writes, where a row count other than expected is now an error.
//
// The orders set aside, or every order of a page whose transaction failed
// on an order's rows or stayed contended, are then closed one transaction
// each (closeOne: a checked close of one order), which dead-letters an
// order that still fails. Every transaction is run again after a deadlock
// or lock wait (retryTx), and commits only while the page's lease is valid.

// pageResult counts what closing one page did.
type pageResult struct {
	closed, paid, locked, deadLettered, gone, notDue int
	lockErrors, leaseLost, contended                 int
	conflicts                                        int // close transactions rolled back by a deadlock, a lock wait or a certification conflict
	lockErr                                          error
	tradePaid, tradeErrors                           int           // payment step: already paid; call failed
	tradeErr                                         error         // first error behind tradeErrors
	maxLate                                          time.Duration // the latest close of the page (close time - deadline)

	detail *pageDetail // per-order outcomes for CloseOrders; nil for Run
}

func (p pageResult) skipped() int { return p.paid + p.locked + p.gone + p.notDue }

func (p *pageResult) count(o Outcome) {
	switch o {
	case OutcomeClosed:
		p.closed++
	case OutcomeSkippedPaid:
		p.paid++
	case OutcomeSkippedLocked:
		p.locked++
	case OutcomeDeadLettered:
		p.deadLettered++
	case OutcomeNotDue:
		p.notDue++
	default: // closed before, not found
		p.gone++
	}
}

// closePage closes the locked orders of a page (closeHeld) and releases
// the page's locks. The work runs without ctx's cancellation (bounded by
// its lease, see pageCtx) so that a cancelled run never leaves a page half
// done. The error is fatal for the run (database unreachable, dead letter
// not written).
func (c *Closer) closePage(ctx context.Context, clock runClock, p page) (pageResult, error) {
	res := pageResult{detail: p.detail}
	lease := p.lease
	defer c.release(ctx, lease)
	ctx, cancel := c.pageCtx(ctx, lease)
	defer cancel()
	held := c.heldRows(ctx, p, &res)
	if len(held) > 0 && c.cfg.TradeCloser != nil {
		rows, err := c.closeTrades(ctx, clock, held, lease, &res)
		if err != nil {
			return res, fmt.Errorf("close page of %d orders: %w", len(held), err)
		}
		held = rows
	}
	if len(held) == 0 {
		return res, nil
	}
	return res, c.closeHeld(ctx, clock, held, p.pageData, lease, &res)
}

// heldRows returns the rows of p whose locks its lease holds and counts the
// others as locked (and as lock errors when Redis failed on them).
func (c *Closer) heldRows(ctx context.Context, p page, res *pageResult) []scanRow {
	held := make([]scanRow, 0, len(p.rows))
	for _, r := range p.rows {
		switch {
		case p.lease.Held(r.OrderNo):
			held = append(held, r)
		case p.lease.Failed(r.OrderNo):
			res.locked++
			res.lockErrors++
		default:
			res.locked++
		}
	}
	if res.lockErrors > 0 {
		res.lockErr = p.lerr
		c.log.WarnContext(ctx, "order locks failed; orders skipped", "num_orders", res.lockErrors, "error", fmt.Sprint(p.lerr))
	}
	return held
}

// closeHeld closes the held orders of a page: a guarded close, and when
// it does not hold, a checked close; then each order the checked close set
// aside in a transaction of its own. When the page's transaction fails on
// an order's rows or stays contended (Server.SplitPage), it rolls back and every
// order is closed in a transaction of its own, so one bad order cannot hold
// back the others. Any other failure is about the database, not an order:
// every order would fail alike, so none is dead-lettered, the error is
// returned and the next run tries again.
func (c *Closer) closeHeld(ctx context.Context, clock runClock, held []scanRow, pd pageData, lease *orderlock.Lease, res *pageResult) error {
	tr, err := c.retryTx(ctx, lease, &res.conflicts, func(tx *sqlx.Tx) (txResult, error) {
		return c.guardedClose(ctx, tx, clock, held, pd, lease)
	})
	if errors.Is(err, errNotAsRead) {
		tr, err = c.retryTx(ctx, lease, &res.conflicts, func(tx *sqlx.Tx) (txResult, error) {
			return c.checkedClose(ctx, tx, clock, held, pd, lease)
		})
	}
	switch {
	case err == nil:
		c.observeClosed(ctx, tr.late)
		res.maxLate = max(res.maxLate, tr.maxLate)
		for no, o := range tr.outcomes {
			res.count(o)
			res.detail.set(no, o)
		}
		return c.closeEach(ctx, clock, tr.setAside(held), pd, lease, res)
	case leaseRanOut(err, lease):
		c.log.WarnContext(ctx, "order locks ran out before commit; page left to the next pass",
			"batch_size", len(held), "ttl", c.locker.TTL().String())
		res.locked += len(held)
		res.leaseLost += len(held)
		for _, r := range held {
			res.detail.setErr(r.OrderNo, OutcomeSkippedLocked, ErrLeaseExpired)
		}
		return nil
	case !c.cfg.Server.SplitPage(err):
		return fmt.Errorf("close page of %d orders: %w", len(held), err)
	}
	c.log.WarnContext(ctx, "batch close failed; closing the page one order at a time",
		"batch_size", len(held), "error", err.Error(), "error_kind", c.cfg.Server.Kind(err).String())
	return c.closeEach(ctx, clock, held, pd, lease, res)
}

// retryTx runs run in a transaction, and again after it rolled back on a
// deadlock or a lock wait timeout (dbserver.KindContention), spaced by backoff.Contention,
// until LockAttempts runs or the lease ran out; each such rollback counts in
// conflicts. It returns the last run's result and error (joined with the
// context's when the lease's deadline ended a wait: leaseRanOut then holds).
func (c *Closer) retryTx(ctx context.Context, lease *orderlock.Lease, conflicts *int, run func(*sqlx.Tx) (txResult, error)) (txResult, error) {
	var tr txResult
	err := backoff.Retry(ctx, backoff.Contention, c.cfg.LockAttempts, func(ctx context.Context, _ int) (bool, error) {
		err := c.inTx(ctx, func(tx *sqlx.Tx) (err error) {
			tr, err = run(tx)
			return err
		})
		if !c.cfg.Server.Retryable(err) {
			return false, err
		}
		*conflicts++
		return !leaseRanOut(err, lease), err
	})
	return tr, err
}

// closeEach closes rows one transaction each, the fallback that keeps one
// bad order from holding back or rolling back the others.
func (c *Closer) closeEach(ctx context.Context, clock runClock, rows []scanRow, pd pageData, lease *orderlock.Lease, res *pageResult) error {
	for _, r := range rows {
		var one oneResult
		var err error
		if lease.ValidFor(c.cfg.CommitMargin) {
			one, err = c.closeOne(ctx, clock, r, pd, lease)
		} else {
			// The lease is over: no transaction could commit.
			one = oneResult{outcome: OutcomeSkippedLocked, leaseLost: true}
		}
		if err != nil {
			return err
		}
		res.add(one)
		res.detail.setOne(r.OrderNo, one)
	}
	return nil
}

// oneResult is what closing a single order did.
type oneResult struct {
	outcome   Outcome
	cause     error // why it was dead-lettered, or why its rows stayed contended
	leaseLost bool
	contended bool // skipped: its rows stayed locked by other transactions
	conflicts int  // its transactions rolled back by contention (each retry counts)
	late      time.Duration
}

func (p *pageResult) add(o oneResult) {
	p.count(o.outcome)
	p.maxLate = max(p.maxLate, o.late)
	if o.leaseLost {
		p.leaseLost++
	}
	if o.contended {
		p.contended++
	}
	p.conflicts += o.conflicts
}

// closeOne closes one locked order in a checked close of its own, retrying
// lock contention; an order whose data is wrong fails that transaction
// (rolled back) and is dead-lettered, as is one whose transaction fails on
// its rows. The returned error is fatal (the database is unreachable or the
// dead letter cannot be written).
func (c *Closer) closeOne(ctx context.Context, clock runClock, r scanRow, pd pageData, lease *orderlock.Lease) (oneResult, error) {
	conflicts := 0
	tr, err := c.retryTx(ctx, lease, &conflicts, func(tx *sqlx.Tx) (txResult, error) {
		tr, err := c.checkedClose(ctx, tx, clock, []scanRow{r}, pd, lease)
		if err == nil {
			err = tr.bad[r.OrderNo]
		}
		return tr, err
	})
	switch {
	case err == nil:
		c.observeClosed(ctx, tr.late)
		return oneResult{outcome: tr.outcomes[r.OrderNo], late: tr.maxLate, conflicts: conflicts}, nil
	case leaseRanOut(err, lease):
		c.log.WarnContext(orderCtx(ctx, r.OrderNo), "order lock ran out before commit", "order_no", r.OrderNo)
		return oneResult{outcome: OutcomeSkippedLocked, leaseLost: true, conflicts: conflicts}, nil
	case c.cfg.Server.Retryable(err):
		// Other transactions hold this order's rows: nothing is wrong
		// with the order, so it waits for the next pass.
		c.log.WarnContext(orderCtx(ctx, r.OrderNo), "order rows held by other transactions; left to the next pass",
			"order_no", r.OrderNo, "error", err.Error())
		return oneResult{outcome: OutcomeSkippedLocked, cause: err, contended: true, conflicts: conflicts}, nil
	case c.cfg.Server.Kind(err) != dbserver.KindOrder:
		return oneResult{}, fmt.Errorf("close order %s: %w", r.OrderNo, err)
	}
	if dlErr := c.deadLetter(ctx, r.OrderNo, clock.now, err); dlErr != nil {
		// Classified by the dead letter's own failure: the order's
		// error is only context here.
		return oneResult{}, fmt.Errorf("%w (the close failed with: %v)", dlErr, err)
	}
	c.log.WarnContext(orderCtx(ctx, r.OrderNo), "order close dead-lettered", "order_no", r.OrderNo, "error", err.Error())
	return oneResult{outcome: OutcomeDeadLettered, cause: err, conflicts: conflicts}, nil
}

// txResult is what one close transaction decided, per order number.
type txResult struct {
	outcomes map[string]Outcome // every order handled (closed or skipped)
	bad      map[string]error   // orders set aside because their data is wrong (checked close)
	late     []time.Duration    // lateness of the closed orders, for the Observer (nil without one)
	maxLate  time.Duration      // the largest lateness among them, for the run record
}

// setAside returns the rows of the orders the transaction set aside.
func (tr txResult) setAside(rows []scanRow) []scanRow {
	var out []scanRow
	for _, r := range rows {
		if _, ok := tr.bad[r.OrderNo]; ok {
			out = append(out, r)
		}
	}
	return out
}

// candidate is an order being closed in a transaction, with its lines.
type candidate struct {
	orderRow
	items []itemRow
}

// errNotAsRead: a guarded close found an order no longer unpaid and due, or
// a stock row, coupon or other giveback not as expected; it rolls back and
// the page is closed by a checked close.
var errNotAsRead = errors.New("orders: page's rows not as read")

// guardedClose closes rows inside tx with writes only (see the top of this
// file): the orders are those the page read, unlocked; the status CAS,
// which repeats unpaid and due, locks them (by id). Any UPDATE changing
// other rows than expected, or a line with a quantity below 1, returns
// errNotAsRead: the caller rolls back and runs checkedClose.
func (c *Closer) guardedClose(ctx context.Context, tx *sqlx.Tx, clock runClock, rows []scanRow, pd pageData, lease *orderlock.Lease) (txResult, error) {
	tr := txResult{outcomes: make(map[string]Outcome, len(rows))}
	cands := make([]*candidate, len(rows))
	for i, r := range rows {
		cands[i] = &candidate{orderRow: r.order()}
	}
	if err := c.attachItems(ctx, tx, cands, pd.items); err != nil {
		return tr, err
	}
	for _, cd := range cands {
		if slices.ContainsFunc(cd.items, func(it itemRow) bool { return it.Quantity <= 0 }) {
			return tr, errNotAsRead
		}
	}
	unexpected := func(string, int64, int64) error { return errNotAsRead }
	return tr, c.writeClose(ctx, tx, clock, cands, pd, lease, unexpected, &tr)
}

// checkedClose closes rows inside tx reading first (see the top of this
// file): it locks the orders (by id) and skips those no longer unpaid and
// due, locks and checks their stock rows (by key) and coupons and sets
// aside in tr.bad, with their outcome left out, the orders that cannot be
// closed as their data stands (validate). The rest close; an UPDATE then
// changing other rows than expected is a CompensationError: a trigger or a
// tool bypassing the row locks, or two orders of the page matching one
// and the same used coupon row (by match, without copies: validation sees
// only each order's count), which the per-order fallback then tells apart.
func (c *Closer) checkedClose(ctx context.Context, tx *sqlx.Tx, clock runClock, rows []scanRow, pd pageData, lease *orderlock.Lease) (txResult, error) {
	tr := txResult{outcomes: make(map[string]Outcome, len(rows)), bad: map[string]error{}}
	cands, err := c.lockCandidates(ctx, tx, clock, rows, tr.outcomes)
	if err != nil || len(cands) == 0 {
		return tr, err
	}
	if err := c.attachItems(ctx, tx, cands, pd.items); err != nil {
		return tr, err
	}
	if err := c.validate(ctx, tx, cands, tr.bad); err != nil {
		return tr, err
	}
	for no := range tr.bad {
		delete(tr.outcomes, no)
	}
	good := keep(cands, tr.bad)
	if len(good) == 0 {
		return tr, nil
	}
	// The per-order fallback finds the order a page's error concerns.
	unexpected := func(what string, want, got int64) error {
		e := &CompensationError{Reason: fmt.Sprintf("%s: %d rows changed of %d", what, got, want)}
		if len(good) == 1 {
			e.OrderNo = good[0].OrderNo
		}
		return e
	}
	return tr, c.writeClose(ctx, tx, clock, good, pd, lease, unexpected, &tr)
}

// writeClose writes the close of good inside tx, in the global lock order:
// the status CAS (orders by id), the givebacks (stock by key, coupons, other
// givebacks by key), the close log, the resolution of the waiting dead
// letters among them, and last the lease check. Every guarded UPDATE must
// change exactly the expected rows; unexpected(what, want, got) says what
// it means when one does not. It records the closed orders in tr. Any
// error means the caller must roll back.
func (c *Closer) writeClose(ctx context.Context, tx *sqlx.Tx, clock runClock, good []*candidate, pd pageData, lease *orderlock.Lease, unexpected func(what string, want, got int64) error, tr *txResult) error {
	closeTime := clock.closeTime()
	ids := make([]int64, len(good))
	nos := make([]string, len(good))
	for i, cd := range good {
		ids[i], nos[i] = cd.ID, cd.OrderNo
	}
	shopClose := clock.shopCloseTime()
	n, err := c.store.closeOrders(ctx, tx, ids, shopClose, c.cfg.Reason, clock.shop)
	if err != nil {
		return err
	}
	if n != int64(len(ids)) {
		return unexpected(fmt.Sprintf("close %d orders", len(ids)), int64(len(ids)), n)
	}
	if err := c.giveBack(ctx, tx, good, ids, unexpected); err != nil {
		return err
	}
	if err := c.store.insertCloseLogs(ctx, tx, nos, closeTime, c.cfg.Reason); err != nil {
		return err
	}
	var resolve []string
	for _, no := range nos {
		if pd.letters[no] {
			resolve = append(resolve, no)
		}
	}
	if len(resolve) > 0 {
		if err := c.store.resolveDeadLetters(ctx, tx, resolve); err != nil {
			return err
		}
	}
	// Last: commit only while every lock is surely still ours. A lock that
	// may have expired means another holder may be acting on the order.
	if !lease.ValidFor(c.cfg.CommitMargin) {
		return ErrLeaseExpired
	}
	tr.late = c.lateness(good, shopClose)
	for _, cd := range good {
		tr.maxLate = max(tr.maxLate, shopClose.Sub(cd.deadline()))
		tr.outcomes[cd.OrderNo] = OutcomeClosed
	}
	return nil
}

// giveBack gives back what the closed orders good (ids) held. Outbox mode:
// stock and coupons are other services'; the events that give them back
// are written here and delivered after commit. Local mode: the stock summed
// per SKU (ascending), the coupons (ascending id), then the other
// givebacks, each UPDATE repeating the expected state (locked >= quantity;
// coupon locked by that order) and changing one row per key, else
// unexpected.
func (c *Closer) giveBack(ctx context.Context, tx *sqlx.Tx, good []*candidate, ids []int64, unexpected func(string, int64, int64) error) error {
	if c.cfg.Compensation != CompensateLocal {
		return c.enqueueCompensation(ctx, tx, good)
	}
	if deltas := sumDeltas(good); len(deltas) > 0 && c.store.sql().Stock != nil {
		n, err := c.store.releaseStock(ctx, tx, deltas)
		if err != nil {
			return err
		}
		if n != int64(len(deltas)) {
			return unexpected("release stock", int64(len(deltas)), n)
		}
	}
	_, orders := couponOrders(good)
	if err := coupon.GiveBack(ctx, tx, c.store.sql().Coupon, orders, unexpected); err != nil {
		return err
	}
	return c.giveBackExtra(ctx, tx, ids, unexpected)
}

// lockCandidates locks and reads the orders of rows (ascending id) and
// returns those still unpaid and due, recording the outcome of the others
// (and of rows not found) in outcomes.
func (c *Closer) lockCandidates(ctx context.Context, tx *sqlx.Tx, clock runClock, rows []scanRow, outcomes map[string]Outcome) ([]*candidate, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
		outcomes[r.OrderNo] = OutcomeNotFound // until the row is seen
	}
	slices.Sort(ids)
	locked, err := c.store.lockOrders(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	var cands []*candidate
	for _, o := range locked {
		switch {
		case o.Status == orderstatus.Paid:
			outcomes[o.OrderNo] = OutcomeSkippedPaid
		case o.Status != orderstatus.Unpaid:
			outcomes[o.OrderNo] = OutcomeSkippedClosed
		case !o.due(clock.shop):
			outcomes[o.OrderNo] = OutcomeNotDue
		default:
			cands = append(cands, &candidate{orderRow: o})
		}
	}
	return cands, nil
}

// attachItems gives each candidate its lines: from items when the page read
// them ahead (an order missing there has none), else read here (lines never
// change after an order is placed, so no lock is needed).
func (c *Closer) attachItems(ctx context.Context, tx *sqlx.Tx, cands []*candidate, items map[string][]itemRow) error {
	if items == nil {
		rows := make([]scanRow, len(cands))
		for i, cd := range cands {
			rows[i] = cd.scanRow
		}
		var err error
		if items, err = c.readItems(ctx, tx, rows); err != nil {
			return err
		}
	}
	for _, cd := range cands {
		cd.items = items[c.itemKey(cd.scanRow)]
	}
	return nil
}

// validate locks the candidates' stock rows (ascending key) and coupons
// (ascending id) and records in bad every order that cannot be closed as its
// data stands: an item with a quantity below 1, a missing stock row, a
// coupon missing or not used by the order (by match: not exactly one used
// row matching it; with copies, no copy left for it), or a subtracted
// stock column below what the page would take from a SKU.
func (c *Closer) validate(ctx context.Context, tx *sqlx.Tx, cands []*candidate, bad map[string]error) error {
	if c.cfg.Compensation == CompensateOutbox {
		validateOutbox(cands, bad)
		return nil
	}
	markBad := func(cd *candidate, reason string) {
		if _, dup := bad[cd.OrderNo]; !dup {
			bad[cd.OrderNo] = &CompensationError{OrderNo: cd.OrderNo, Reason: reason}
		}
	}
	for _, cd := range cands {
		for _, it := range cd.items {
			if it.Quantity <= 0 {
				markBad(cd, fmt.Sprintf("item of sku %d has quantity %d", it.SKUID, it.Quantity))
			}
		}
	}
	if err := c.validateStock(ctx, tx, cands, bad, markBad); err != nil {
		return err
	}
	return c.validateCoupons(ctx, tx, cands, bad, markBad)
}

func keep(cands []*candidate, bad map[string]error) []*candidate {
	out := cands[:0:0]
	for _, cd := range cands {
		if _, b := bad[cd.OrderNo]; !b {
			out = append(out, cd)
		}
	}
	return out
}

// sumDeltas sums the orders' quantities per SKU, in ascending sku_id order.
func sumDeltas(cands []*candidate) []skuDelta {
	sum := map[int64]int64{}
	for _, cd := range cands {
		for _, it := range cd.items {
			sum[it.SKUID] += it.Quantity
		}
	}
	out := make([]skuDelta, 0, len(sum))
	for _, sku := range sortedKeys(sum) {
		out = append(out, skuDelta{SKUID: sku, Qty: sum[sku]})
	}
	return out
}

func sortedKeys[V any](m map[int64]V) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
