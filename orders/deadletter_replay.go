package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderjob/executor/orders/deadletters"
)

// RetryOptions are one dead-letter retry run's parameters (the job param of
// deadLetterRetryJob and its sharding).
type RetryOptions struct {
	// ShardIndex and ShardTotal select the letters of one shard (shard.Of(id, total) = index)
	// (the letter's id). Total 0 or 1 takes every letter.
	ShardIndex, ShardTotal int
	// PageSize is the number of letters read per scan page. Default 100, at
	// most 5000.
	PageSize int
	// MaxLetters caps the letters handled in this run. 0: no cap.
	MaxLetters int
	// DryRun counts the due letters (RetryStats.Found) and changes nothing.
	DryRun bool
}

// RetryStats is what a retry run did. Every letter found is counted in
// exactly one of Closed, AlreadyDone, Failed, Parked and Skipped (none in a
// dry run).
type RetryStats struct {
	Found       int // due waiting close letters the scan returned
	Closed      int // the order is closed now; the letter resolved by the close
	AlreadyDone int // the order was paid or closed before: letter resolved, nothing else changed
	Failed      int // the close failed again: attempts raised, next retry pushed back
	Parked      int // parked for a person: maximum attempts reached, or the order is gone
	Skipped     int // taken by a concurrent run, locked elsewhere, not due, parked meanwhile
	Elapsed     time.Duration

	// Not in String():
	SkipErrors int   // of Skipped: skipped because of an error (Redis, the payment side)
	SkipErr    error // the first of those errors
	Pages      int
	DryRun     bool
}

// String renders the summary line:
// found=N closed=N already_done=N failed=N parked=N skipped=N seconds=S.
func (s RetryStats) String() string {
	return fmt.Sprintf("found=%d closed=%d already_done=%d failed=%d parked=%d skipped=%d seconds=%.3f",
		s.Found, s.Closed, s.AlreadyDone, s.Failed, s.Parked, s.Skipped, s.Elapsed.Seconds())
}

// Reasons written to status_reason by the retry job.
const (
	reasonClosedOnRetry = "closed by deadLetterRetryJob"
	reasonPaid          = "order is paid; nothing to close"
	reasonNotUnpaid     = "order is no longer unpaid (closed before, further on, or soft-deleted); nothing to close"
)

// DefaultRetryPageSize is RetryOptions.PageSize when it is zero.
const DefaultRetryPageSize = 100

// RetryDeadLetters retries the close of the orders whose close dead letter
// is waiting and due (next_retry_at at or before the database clock, read
// once at the start), in keyset pages over idx_table_status_retry, for one
// shard (shard.Of(letter id, total) = index): the letters of c's order
// table, then those that name no table (written before migration 0138).
//
// Each letter is first claimed (a conditional UPDATE that repeats the state
// the scan saw and pushes next_retry_at past the replay's worst case), so of
// two runs that found the same letter, at once or one after the other, only
// one replays it. The replay is CloseOrder: the same Redis lock, status CAS,
// compensation and dead-letter rules as the sweep. So:
//
//   - the order closes: the close transaction resolves the letter (kept for
//     the record);
//   - the order was paid or closed meanwhile: a counted no-op, the letter is
//     resolved with the reason;
//   - the close fails again: the close path's own dead-letter upsert raises
//     attempts and pushes next_retry_at back exponentially
//     (CloserConfig.DeadLetterBackoff), and parks the letter once attempts
//     reach DeadLetterBackoff.ParkAfter; the reason is noted;
//   - the order does not exist: the letter is parked with that reason;
//   - the order's lock is held elsewhere, Redis or the payment side fails,
//     or the order is not due (its timeout was raised): nothing changes;
//     the claim runs out and a later run tries again.
//
// Cancellation is checked between letters. The error is fatal (database
// unreachable, a letter cannot be written); the stats so far are returned
// with it.
func (c *Closer) RetryDeadLetters(ctx context.Context, opt RetryOptions) (RetryStats, error) {
	return c.retryDeadLetters(ctx, opt, []*Closer{c})
}

// retryDeadLetters is RetryDeadLetters of c's table; with tableless, the
// Closers of c's database (c first), it also takes the letters that name
// no table, each closed by the first of tableless whose table holds its
// order. Without, it leaves them to the unit that takes them.
func (c *Closer) retryDeadLetters(ctx context.Context, opt RetryOptions, tableless []*Closer) (RetryStats, error) {
	start := time.Now()
	st := RetryStats{DryRun: opt.DryRun}
	if opt.ShardTotal <= 0 {
		opt.ShardTotal = 1
	}
	if opt.ShardIndex < 0 || opt.ShardIndex >= opt.ShardTotal {
		return st, fmt.Errorf("orders: shard index %d out of [0, %d)", opt.ShardIndex, opt.ShardTotal)
	}
	opt.PageSize = cmp.Or(opt.PageSize, DefaultRetryPageSize)
	if opt.PageSize < 1 || opt.PageSize > maxPageSize {
		return st, fmt.Errorf("orders: page size %d out of [1, %d]", opt.PageSize, maxPageSize)
	}
	if opt.MaxLetters < 0 {
		return st, fmt.Errorf("orders: maxLetters %d is negative", opt.MaxLetters)
	}
	clock, _, err := c.readClock(ctx)
	if err != nil {
		return st, err
	}

	err = c.retryPages(ctx, opt, clock, c.Table(), nil, &st)
	if err == nil && len(tableless) > 0 {
		err = c.retryPages(ctx, opt, clock, "", tableless, &st)
	}
	st.Elapsed = time.Since(start)
	if err != nil {
		return st, err
	}
	attrs := []any{"source", c.Source(), "table", c.Table(), "shard_index", opt.ShardIndex, "shard_total", opt.ShardTotal,
		"dry_run", opt.DryRun, "num_found", st.Found, "num_closed", st.Closed, "num_already_done", st.AlreadyDone,
		"num_failed", st.Failed, "num_parked", st.Parked, "num_skipped", st.Skipped,
		"num_skip_errors", st.SkipErrors, "seconds", st.Elapsed.Seconds()}
	if st.SkipErr != nil {
		attrs = append(attrs, "skip_error", st.SkipErr.Error())
	}
	c.log.InfoContext(ctx, "dead-letter retry run finished", attrs...)
	return st, nil
}

// retryPages replays the due letters of table (see retryDeadLetters for
// tableless), page by page, until none is left or MaxLetters are found.
func (c *Closer) retryPages(ctx context.Context, opt RetryOptions, clock runClock, table string, tableless []*Closer, st *RetryStats) error {
	p := dueLetterParams{Table: table, ShardIndex: opt.ShardIndex, ShardTotal: opt.ShardTotal, Now: clock.now,
		AfterAt: firstCursor.CreateTime, AfterID: -1}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.Limit = opt.PageSize
		if opt.MaxLetters > 0 {
			if left := opt.MaxLetters - st.Found; left <= 0 {
				return nil
			} else if left < p.Limit {
				p.Limit = left
			}
		}
		rows, err := c.store.dueLetters(ctx, c.db, p)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		st.Pages++
		last := rows[len(rows)-1]
		p.AfterAt, p.AfterID = last.NextRetryAt, last.ID
		for _, l := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			st.Found++
			if opt.DryRun {
				continue
			}
			if err := c.replay(ctx, clock, l, tableless, st); err != nil {
				return err
			}
		}
		c.log.DebugContext(ctx, "dead-letter retry page", "table", table, "page", st.Pages, "batch_size", len(rows))
		if len(rows) < p.Limit {
			return nil
		}
	}
}

// closeLetter closes a letter's order: with c, or for a letter that names
// no table with the first of tableless whose table holds the order. It
// returns the reason to park the letter with when no table does.
func (c *Closer) closeLetter(ctx context.Context, orderNo string, tableless []*Closer) (Outcome, string, error) {
	if len(tableless) <= 1 {
		out, err := c.CloseOrder(ctx, orderNo)
		return out, c.store.sql().OrderGone, err
	}
	for _, u := range tableless {
		out, err := u.CloseOrder(ctx, orderNo)
		if out != OutcomeNotFound {
			return out, "", err
		}
	}
	return OutcomeNotFound, fmt.Sprintf("order not found in the %d order tables of source %s", len(tableless), c.Source()), nil
}

// settle moves the claimed letter id to status with reason, counting it
// in *done, or in st.Skipped when another run settled it meanwhile.
func (c *Closer) settle(ctx context.Context, db rerunDB, id int64, status, reason string, done *int, st *RetryStats) (bool, error) {
	settled, err := c.store.settleLetter(ctx, db, id, status, reason)
	switch {
	case err != nil:
		return false, err
	case settled:
		*done++
	default:
		st.Skipped++
	}
	return settled, nil
}

// replay claims one letter and closes its order with CloseOrder, then
// settles the letter according to the outcome (see RetryDeadLetters). The
// error is fatal for the run.
func (c *Closer) replay(ctx context.Context, clock runClock, l dueLetter, tableless []*Closer, st *RetryStats) error {
	// The claim lasts as long as one CloseOrder can (its work is bounded by
	// pageTimeout), on the run's clock advanced by the local monotonic time,
	// and at least that long in real time (closesql.ClaimLetter).
	ttl := c.pageTimeout()
	db := rerunDB{c.db, c.cfg.Server}
	ok, err := c.store.claimLetter(ctx, db, l, clock.now, clock.closeTime().Add(ttl), ttl)
	if err != nil {
		return err
	}
	if !ok {
		st.Skipped++ // another run took it, or it changed since the scan
		return nil
	}
	out, gone, err := c.closeLetter(ctx, l.OrderNo, tableless)
	switch out {
	case OutcomeClosed:
		st.Closed++
		return c.store.noteLetter(ctx, db, l.ID, deadletters.Resolved, reasonClosedOnRetry)
	case OutcomeSkippedPaid, OutcomeSkippedClosed:
		reason := reasonPaid
		if out == OutcomeSkippedClosed {
			reason = reasonNotUnpaid
		}
		_, serr := c.settle(ctx, db, l.ID, deadletters.Resolved, reason, &st.AlreadyDone, st)
		return serr
	case OutcomeNotFound:
		settled, serr := c.settle(ctx, db, l.ID, deadletters.Parked, gone, &st.Parked, st)
		if settled {
			c.log.WarnContext(ctx, "dead letter parked", "order_no", l.OrderNo, "reason", gone)
		}
		return serr
	case OutcomeDeadLettered:
		// CloseOrder's dead-letter upsert raised attempts and set the next
		// retry, or parked the letter at the maximum.
		dl, rerr := deadletters.New(c.db).GetByID(ctx, l.ID)
		if rerr != nil && !errors.Is(rerr, deadletters.ErrNotFound) {
			return rerr
		}
		if rerr == nil && dl.Status == deadletters.Parked {
			st.Parked++
			reason := fmt.Sprintf("parked after %d failed attempts (maximum %d); see last_error", dl.Attempts, c.cfg.DeadLetterBackoff.ParkAfter)
			c.log.WarnContext(ctx, "dead letter parked", "order_no", l.OrderNo, "attempts", dl.Attempts, "error", fmt.Sprint(err))
			return c.store.noteLetter(ctx, db, l.ID, deadletters.Parked, reason)
		}
		st.Failed++
		return nil
	case OutcomeSkippedLocked:
		// Held elsewhere (no error), or Redis or the payment side failed.
		st.Skipped++
		if err != nil {
			st.SkipErrors++
			if st.SkipErr == nil {
				st.SkipErr = err
			}
		}
		return nil
	case 0:
		return fmt.Errorf("retry dead letter of %s: %w", l.OrderNo, err)
	default:
		// Not due (its timeout was raised), parked meanwhile, or an outcome
		// added later: leave the letter; the claim runs out.
		st.Skipped++
		c.log.DebugContext(ctx, "dead letter left", "order_no", l.OrderNo, "outcome", out.String())
		return nil
	}
}
