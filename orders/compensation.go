package orders

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
)

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

// closePage closes the locked orders of a page in one transaction and
// releases the page's locks. The work runs without ctx's cancellation
// (bounded by its lease, see pageCtx) so that a cancelled run never leaves a
// page half done.
//
// The transaction is first tried with writes only (txFast); when a guarded
// write finds rows not as the page's reads left them, it is rolled back and
// run again reading more under lock (txOptimistic, then txBatch). If the
// batch transaction fails for a reason other than lock contention, it is
// rolled back and every order is closed in a transaction of its own, so one
// bad order cannot hold back the others. The error is fatal for the run
// (database unreachable, dead letter not written).
func (c *Closer) closePage(ctx context.Context, clock runClock, p page) (pageResult, error) {
	res := pageResult{detail: p.detail}
	lease := p.lease
	defer c.release(ctx, lease)
	ctx, cancel := c.pageCtx(ctx, lease)
	defer cancel()
	held := make([]scanRow, 0, len(p.rows))
	for _, r := range p.rows {
		switch {
		case lease.Held(r.OrderNo):
			held = append(held, r)
		case lease.Failed(r.OrderNo):
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
	if len(held) == 0 {
		return res, nil
	}
	if c.cfg.TradeCloser != nil {
		rows, err := c.closeTrades(ctx, clock, held, lease, &res)
		if err != nil {
			return res, fmt.Errorf("close page of %d orders: %w", len(held), err)
		}
		if held = rows; len(held) == 0 {
			return res, nil
		}
	}

	mode := txFast
	for attempt := 1; ; attempt++ {
		var tr txResult
		err := c.inTx(ctx, func(tx *sqlx.Tx) error {
			var err error
			tr, err = c.closeTx(ctx, tx, clock, held, p.pageData, lease, mode)
			return err
		})
		if c.cfg.Server.retryable(err) {
			res.conflicts++
		}
		switch {
		case errors.Is(err, errOrdersChanged) && mode == txFast:
			// An order is no longer unpaid and due as the page read it:
			// run the page again with its orders read under lock, which
			// skips those.
			mode = txOptimistic
			attempt--
			continue
		case errors.Is(err, errNeedsValidation) && mode != txBatch:
			// Some stock row or coupon was not as expected: run the page
			// again with every row read and checked first.
			mode = txBatch
			attempt--
			continue
		case err == nil:
			c.observeClosed(ctx, tr.late)
			res.maxLate = max(res.maxLate, tr.maxLate)
			for no, o := range tr.outcomes {
				res.count(o)
				res.detail.set(no, o)
			}
			// Orders that failed validation were left out of the batch; each
			// now gets its own transaction, which records why it fails.
			var bad []scanRow
			for _, r := range held {
				if _, ok := tr.bad[r.OrderNo]; ok {
					bad = append(bad, r)
				}
			}
			err := c.closeEach(ctx, clock, bad, p.pageData, lease, &res)
			return res, err
		case leaseRanOut(err, lease):
			c.log.WarnContext(ctx, "order locks ran out before commit; page left to the next pass",
				"batch_size", len(held), "ttl", c.locker.TTL().String())
			res.locked += len(held)
			res.leaseLost += len(held)
			for _, r := range held {
				res.detail.setErr(r.OrderNo, OutcomeSkippedLocked, ErrLeaseExpired)
			}
			return res, nil
		case c.cfg.Server.retryable(err) && attempt < c.cfg.LockAttempts:
			if werr := deadlockWait.Wait(ctx, attempt); werr != nil {
				return res, werr
			}
			continue
		case !c.cfg.Server.splitPage(err):
			// About the database, not an order (a table or privilege
			// missing, the server read-only, the connection lost): every
			// order would fail alike, so none is dead-lettered; the
			// transaction rolled back and the next run tries again.
			return res, fmt.Errorf("close page of %d orders: %w", len(held), err)
		}
		c.log.WarnContext(ctx, "batch close failed; closing the page one order at a time",
			"batch_size", len(held), "error", err.Error(), "error_kind", c.cfg.Server.Kind(err).String())
		err = c.closeEach(ctx, clock, held, p.pageData, lease, &res)
		return res, err
	}
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

// closeOne closes one locked order in its own transaction, retrying lock
// contention, and dead-letters it if it still fails. The returned error is
// fatal (the database is unreachable or the dead letter cannot be written).
func (c *Closer) closeOne(ctx context.Context, clock runClock, r scanRow, pd pageData, lease *orderlock.Lease) (oneResult, error) {
	conflicts := 0
	for attempt := 1; ; attempt++ {
		var tr txResult
		err := c.inTx(ctx, func(tx *sqlx.Tx) error {
			var err error
			tr, err = c.closeTx(ctx, tx, clock, []scanRow{r}, pd, lease, txSingle)
			return err
		})
		if c.cfg.Server.retryable(err) {
			conflicts++
		}
		switch {
		case err == nil:
			c.observeClosed(ctx, tr.late)
			return oneResult{outcome: tr.outcomes[r.OrderNo], late: tr.maxLate, conflicts: conflicts}, nil
		case leaseRanOut(err, lease):
			c.log.WarnContext(orderCtx(ctx, r.OrderNo), "order lock ran out before commit", "order_no", r.OrderNo)
			return oneResult{outcome: OutcomeSkippedLocked, leaseLost: true, conflicts: conflicts}, nil
		case c.cfg.Server.retryable(err) && attempt < c.cfg.LockAttempts:
			if werr := deadlockWait.Wait(ctx, attempt); werr != nil {
				return oneResult{}, werr
			}
			continue
		case c.cfg.Server.retryable(err):
			// Other transactions hold this order's rows: nothing is wrong
			// with the order, so it waits for the next pass.
			c.log.WarnContext(orderCtx(ctx, r.OrderNo), "order rows held by other transactions; left to the next pass",
				"order_no", r.OrderNo, "error", err.Error())
			return oneResult{outcome: OutcomeSkippedLocked, cause: err, contended: true, conflicts: conflicts}, nil
		case c.cfg.Server.Kind(err) != KindOrder:
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
}

// deadlockWait spaces the re-runs of a transaction that lost a deadlock or
// a lock wait: short (the other transaction is about to commit), jittered so
// two losers do not collide again in step.
var deadlockWait = backoff.Exponential{Base: 20 * time.Millisecond, Max: time.Second, Jitter: backoff.EqualJitter}

// txResult is what one close transaction decided, per order number.
type txResult struct {
	outcomes map[string]Outcome // every order handled (closed or skipped)
	bad      map[string]error   // orders left out because their data is wrong (batch mode)
	late     []time.Duration    // lateness of the closed orders, for the Observer (nil without one)
	maxLate  time.Duration      // the largest lateness among them, for the run record
}

// candidate is an order being closed in a transaction, with its lines.
type candidate struct {
	orderRow
	items []itemRow
}

// txMode says how closeTx treats orders whose data is wrong.
type txMode int

const (
	// txFast reads nothing: the status CAS, repeating what the page's read
	// without locks saw (unpaid, due), must change every order of the
	// page, or closeTx returns errOrdersChanged and the caller rolls back
	// and runs txOptimistic; stock and coupons are changed as in
	// txOptimistic. A page's orders are locked in Redis, so another closer
	// or a payment changes one only when its lock ran out: almost every
	// page closes this way, with writes only.
	txFast txMode = iota
	// txOptimistic locks and reads the orders first and skips those no
	// longer unpaid and due, but does not read stock and coupon rows before
	// changing them: the guarded UPDATEs must change exactly the expected
	// rows, or closeTx returns errNeedsValidation and the caller rolls back
	// and runs txBatch. Almost every page is clean, so this saves two
	// locking reads a page.
	txOptimistic
	// txBatch locks and checks every stock and coupon row first and moves
	// orders whose data is wrong out of the batch (txResult.bad).
	txBatch
	// txSingle is txBatch for one order, whose CompensationError is returned.
	txSingle
)

// errNeedsValidation: an optimistic close found a stock row or coupon not as
// expected; roll back and close the page with txBatch.
var errNeedsValidation = errors.New("orders: page needs validated close")

// errOrdersChanged: a txFast close found an order no longer unpaid and due;
// roll back and close the page with txOptimistic.
var errOrdersChanged = errors.New("orders: page's orders changed since they were read")

// closeTx closes the given orders inside tx: lock them (txFast: the CAS
// does), skip those no longer unpaid and due, then the status CAS, the stock
// release, the coupon restore, the other givebacks, the close log and the
// resolution of the waiting dead letters among them, and last the lease
// check. Locks are taken in one global order: orders (by id), stock (by
// key), coupons (by id, or by order id when matched), other givebacks (by
// key). In txBatch and txSingle modes the stock rows and coupons are
// locked and validated before any write (see txMode). Any error means the
// caller must roll back.
func (c *Closer) closeTx(ctx context.Context, tx *sqlx.Tx, clock runClock, rows []scanRow, pd pageData, lease *orderlock.Lease, mode txMode) (txResult, error) {
	tr := txResult{outcomes: make(map[string]Outcome, len(rows)), bad: map[string]error{}}
	var cands []*candidate
	if mode == txFast {
		for _, r := range rows {
			cands = append(cands, &candidate{orderRow: r.order()})
		}
	} else {
		var err error
		if cands, err = c.lockCandidates(ctx, tx, clock, rows, tr.outcomes); err != nil || len(cands) == 0 {
			return tr, err
		}
	}
	if err := c.attachItems(ctx, tx, cands, pd.items); err != nil {
		return tr, err
	}
	good := cands
	if mode == txFast || mode == txOptimistic {
		for _, cd := range cands {
			for _, it := range cd.items {
				if it.Quantity <= 0 {
					return tr, errNeedsValidation
				}
			}
		}
	} else {
		if err := c.validate(ctx, tx, cands, tr.bad); err != nil {
			return tr, err
		}
		good = keep(cands, tr.bad)
		if mode == txSingle && len(tr.bad) > 0 {
			for _, err := range tr.bad {
				return tr, err
			}
		}
		for no := range tr.bad {
			delete(tr.outcomes, no)
		}
	}
	if len(good) == 0 {
		return tr, nil
	}

	// The writes.
	closeTime := clock.closeTime()
	goodIDs := make([]int64, len(good))
	goodNos := make([]string, len(good))
	var goodCoupons []int64
	var couponNos []string
	for i, cd := range good {
		goodIDs[i], goodNos[i] = cd.ID, cd.OrderNo
		if cd.CouponID.Valid {
			goodCoupons = append(goodCoupons, cd.CouponID.Int64)
			couponNos = append(couponNos, cd.OrderNo)
		}
	}
	n, err := c.store.closeOrders(ctx, tx, goodIDs, closeTime, c.cfg.Reason, clock.now)
	if err != nil {
		return tr, err
	}
	if n != int64(len(goodIDs)) && mode == txFast {
		return tr, errOrdersChanged
	}
	// A guarded UPDATE changing fewer rows than were locked and checked
	// (only a trigger or a concurrent tool bypassing the row locks could do
	// that) is about these orders' rows: the per-order fallback finds the
	// order it concerns.
	rowsError := func(what string, want, got int64) error {
		e := &CompensationError{Reason: fmt.Sprintf("%s: %d rows changed of %d", what, got, want)}
		if len(good) == 1 {
			e.OrderNo = good[0].OrderNo
		}
		return e
	}
	if n != int64(len(goodIDs)) {
		return tr, rowsError(fmt.Sprintf("close %d orders", len(goodIDs)), int64(len(goodIDs)), n)
	}
	// A row count short of the expected one means a stock row is missing or
	// short, or a coupon is not locked by its order: unvalidated, that
	// sends the page to validation; after validation it cannot happen (the
	// rows are locked) and is an error.
	short := func(what string, want, got int64) error {
		if mode == txFast || mode == txOptimistic {
			return errNeedsValidation
		}
		return rowsError(what, want, got)
	}
	// Outbox mode: stock and coupons are other services'; the events that
	// give them back are written here and delivered after commit.
	local := c.cfg.Compensation == CompensateLocal
	if !local {
		if err := c.enqueueCompensation(ctx, tx, good); err != nil {
			return tr, err
		}
	}
	if deltas := sumDeltas(good); local && len(deltas) > 0 && c.store.sql().stock != nil {
		n, err := c.store.releaseStock(ctx, tx, deltas)
		if err != nil {
			return tr, err
		}
		if n != int64(len(deltas)) {
			return tr, short("release stock", int64(len(deltas)), n)
		}
	}
	if len(goodCoupons) > 0 && local {
		slices.Sort(goodCoupons)
		goodCoupons = slices.Compact(goodCoupons)
		n, err := c.store.restoreCoupons(ctx, tx, goodCoupons, couponNos)
		if err != nil {
			return tr, err
		}
		if n != int64(len(goodCoupons)) {
			return tr, short("restore coupons", int64(len(goodCoupons)), n)
		}
	}
	if local {
		if err := c.giveBackExtra(ctx, tx, goodIDs, short); err != nil {
			return tr, err
		}
	}
	if err := c.store.insertCloseLogs(ctx, tx, goodNos, closeTime, c.cfg.Reason); err != nil {
		return tr, err
	}
	var resolve []string
	for _, no := range goodNos {
		if pd.letters[no] {
			resolve = append(resolve, no)
		}
	}
	if len(resolve) > 0 {
		if err := c.store.resolveDeadLetters(ctx, tx, resolve); err != nil {
			return tr, err
		}
	}
	// Last: commit only while every lock is surely still ours. A lock that
	// may have expired means another holder may be acting on the order.
	if !lease.ValidFor(c.cfg.CommitMargin) {
		return tr, ErrLeaseExpired
	}
	tr.late = c.lateness(good, closeTime)
	for _, cd := range good {
		tr.maxLate = max(tr.maxLate, closeTime.Sub(cd.deadline()))
	}
	for _, no := range goodNos {
		tr.outcomes[no] = OutcomeClosed
	}
	return tr, nil
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
		case !o.due(clock.now):
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
// row matching it), or a subtracted stock column below what the page would
// take from a SKU.
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
	return c.validateCoupons(ctx, tx, cands, markBad)
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
