package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
	"github.com/orderjob/executor/orders/schema"
)

// CloserConfig configures a Closer. Zero values take the defaults given.
type CloserConfig struct {
	// Logger receives one info line per run, debug lines per page and
	// warnings for degraded states. Default: discard.
	Logger *slog.Logger
	// Reason is written to the order's close reason column (when the
	// schema has one) and order_close_log.reason.
	// Default "payment_timeout"; at most 32 characters.
	Reason string
	// DeadLetterBackoff says when a failed close is retried.
	DeadLetterBackoff DeadLetterBackoff
	// PageSize is the default scan page and close batch size, used when
	// RunOptions.PageSize is zero. Default 500, at most 5000.
	PageSize int
	// LockAttempts is how often a close transaction aborted by a deadlock
	// (1213) or lock wait timeout (1205) is run, in all, before the page
	// falls back to one transaction per order, or the order is skipped for
	// the next pass. Default 3.
	LockAttempts int
	// CommitMargin is how long the locks must stay valid after the last
	// statement for the transaction to be committed; otherwise it rolls back
	// and the orders wait for the next pass. Default 200ms.
	CommitMargin time.Duration
	// TradeCloser, if set, closes each locked order's trade at the payment
	// side before the close transaction (tradestep.go). Default nil: no
	// payment step, no extra call or round trip.
	TradeCloser TradeCloser
	// TradeFanOut is how many close-trade calls of a page run at once.
	// Default 16.
	TradeFanOut int
	// Server is what the database is (dbserver.DetectServer): it decides what some
	// error numbers mean (Server.Kind). Default dbserver.ServerUnknown.
	Server dbserver.Server
	// Compensation is where stock and coupons are given back:
	// CompensateLocal (default) or CompensateOutbox (compensate_outbox.go).
	Compensation CompensationMode
	// Observer receives page counts and close lateness for metrics. nil:
	// none.
	Observer Observer
	// RunRetention is how long the record of each Run (order_close_run)
	// is kept; each run deletes a few older ones. Default 7 days.
	RunRetention time.Duration
	// Host is recorded with each run. Default: the host name.
	Host string
	// SourceName names the order database this Closer closes in (an
	// order.sources item): it labels metrics and log lines and is kept in
	// run records. Default "default", the one database of mysql.dsn.
	SourceName string
	// Schema is where the shop keeps its orders and what a close gives
	// back (package schema). The zero value is schema.Default(), the
	// executor's own tables. Its statements are rendered once, here.
	Schema schema.Schema
}

// Closer closes unpaid orders whose payment timeout has passed: the sweep
// (Run) and the one-order entry point (CloseOrder). See the package doc for
// the rules. A Closer is safe for concurrent use; runs on the same or other
// shards may overlap, in this process or others.
type Closer struct {
	db     *sqlx.DB
	locker *orderlock.Locker
	store  store
	cfg    CloserConfig
	log    *slog.Logger
	// shift is added to the database time a run reads: zero but in tests
	// that must see orders become due without waiting (export_test.go).
	shift time.Duration
}

// DefaultReason is the close reason when CloserConfig.Reason is empty.
const DefaultReason = "payment_timeout"

// DefaultPageSize is CloserConfig.PageSize when zero, and the executor's
// order.close.pageSize default (config takes it from here).
const DefaultPageSize = 500

// NewCloser checks cfg and returns a Closer over db (a DSN with
// parseTime=true&loc=UTC; interpolateParams=true saves a round trip per
// statement) and locker.
func NewCloser(db *sqlx.DB, locker *orderlock.Locker, cfg CloserConfig) (*Closer, error) {
	if db == nil || locker == nil {
		return nil, errors.New("orders: NewCloser needs a database and a locker")
	}
	cfg.Reason = cmp.Or(cfg.Reason, DefaultReason)
	if len(cfg.Reason) > 32 {
		return nil, fmt.Errorf("orders: close reason %q is longer than 32 characters", cfg.Reason)
	}
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	if cfg.PageSize < 1 || cfg.PageSize > maxPageSize {
		return nil, fmt.Errorf("orders: page size %d out of [1, %d]", cfg.PageSize, maxPageSize)
	}
	cfg.LockAttempts = cmp.Or(cfg.LockAttempts, 3)
	cfg.CommitMargin = cmp.Or(cfg.CommitMargin, 200*time.Millisecond)
	cfg.RunRetention = cmp.Or(cfg.RunRetention, DefaultRunRetention)
	if cfg.RunRetention < time.Hour {
		return nil, fmt.Errorf("orders: run retention %s is below 1h", cfg.RunRetention)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	cfg.SourceName = cmp.Or(cfg.SourceName, DefaultSourceName)
	if err := cfg.fillExtensions(); err != nil {
		return nil, err
	}
	sq, err := cfg.renderSchema()
	if err != nil {
		return nil, err
	}
	if cfg.DeadLetterBackoff, err = cfg.DeadLetterBackoff.withDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Closer{db: db, locker: locker, store: store{sq: sq}, cfg: cfg, log: log.With("component", "orders.closer")}, nil
}

// renderSchema fills in the default schema, renders its statements and
// refuses the combinations a close could not carry out in full.
func (cfg *CloserConfig) renderSchema() (*closesql.Statements, error) {
	if cfg.Schema.Orders.Table == "" {
		cfg.Schema = schema.Default()
	}
	if cfg.Compensation == CompensateOutbox {
		// The outbox's events name SKUs, quantities and a coupon id;
		// closing without a giveback the schema declares would silently
		// keep what the order held.
		if c := cfg.Schema.Coupon; c != nil && c.ByMatch() {
			return nil, errors.New("orders: outbox compensation cannot give back a coupon found by matching columns " +
				"(order.schema.coupon.match): its event names a coupon id; use local compensation, or a coupon id on the order")
		}
		if len(cfg.Schema.Extra) > 0 {
			return nil, fmt.Errorf("orders: outbox compensation has no event for the givebacks %v (order.schema.givebacks); use local compensation",
				cfg.Schema.Extra)
		}
	}
	sq, err := closesql.Render(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	return sq, nil
}

const maxPageSize = 5000

// maxLockFailedPages consecutive pages whose every lock failed on Redis
// errors stop a run.
const maxLockFailedPages = 3

// RunOptions are one run's parameters (the XXL-JOB job param and sharding).
type RunOptions struct {
	// ShardIndex and ShardTotal select the orders of one shard (shard.Of(id, total) = index).
	// Total 0 or 1 takes every order.
	ShardIndex, ShardTotal int
	// PageSize is the scan page and close batch size. 0: the Closer's.
	PageSize int
	// MaxOrders caps the due orders handled in this run, closed and skipped
	// alike. A capped run resumes where the shard's last one stopped and
	// wraps around (see scan), so orders stuck at the head do not starve
	// the others. 0: no cap, every run walks all due orders.
	MaxOrders int
	// MaxPerSecond caps the close rate, averaged from the run's start. Pages
	// are cut to a tenth of a second's worth. 0: no cap.
	MaxPerSecond float64
	// DryRun scans and counts the orders that would be closed (in
	// RunStats.Closed) without locking or changing anything.
	DryRun bool
	// Progress, if set, is called after each page, on the run's goroutine.
	Progress func(PageStats)
	// Source says in the run's record what started it (e.g. "xxl-job log
	// 1234", "executor run"); at most 64 bytes.
	Source string
	// LogID is the XXL-JOB admin's log id of the run (0: none), kept in its
	// record.
	LogID int64
}

// PageStats is what one page did; the counts are this page's.
type PageStats struct {
	Page    int           // 1-based page number
	Scanned int           // due orders the page's scan returned
	Closed  int           // closed (dry run: would be closed)
	Skipped int           // paid, already closed, locked elsewhere or not due
	Failed  int           // dead-lettered
	Elapsed time.Duration // since the run started
}

// RunStats is what a run did. Every scanned order is counted in exactly one
// of Closed, SkippedPaid, SkippedLocked, DeadLettered, SkippedClosed and
// SkippedNotDue.
type RunStats struct {
	Scanned       int // due orders the scan returned
	Closed        int // closed (dry run: would be closed)
	SkippedPaid   int // paid between the scan and the lock
	SkippedLocked int // lock held elsewhere, Redis failing, or lease lost
	DeadLettered  int // close failed; recorded in order_dead_letter
	Elapsed       time.Duration

	// Not in String():
	SkippedClosed int   // closed (or deleted) by someone else before we locked it
	SkippedNotDue int   // no longer due when re-read under lock (timeout changed)
	LockErrors    int   // of SkippedLocked: orders whose lock failed because Redis failed
	LockErr       error // first Redis error behind LockErrors
	LeaseLost     int   // of SkippedLocked: rolled back because the lease ran out before commit
	Contended     int   // of SkippedLocked: rows held by other transactions through every lock attempt
	// Conflicts counts close transactions rolled back because other
	// transactions held or changed their rows: a deadlock or lock wait
	// (1213, 1205), or on a Galera cluster a certification conflict with a
	// write through another node (1213). Each was retried or its orders
	// skipped; none is dead-lettered for it.
	Conflicts   int
	TradePaid   int   // of SkippedPaid: the payment side answered already_paid
	TradeErrors int   // of SkippedLocked: the close-trade call failed or did not answer in time
	TradeErr    error // first error behind TradeErrors
	Pages       int   // scan pages read
	DryRun      bool
	// MaxLateness is the largest close time minus deadline among the
	// orders closed: how late the run was for the most overdue order.
	MaxLateness time.Duration
}

// String renders the fixed summary line:
// scanned=N closed=N skipped_paid=N skipped_locked=N dead_lettered=N seconds=S.
func (s RunStats) String() string {
	return fmt.Sprintf("scanned=%d closed=%d skipped_paid=%d skipped_locked=%d dead_lettered=%d seconds=%.3f",
		s.Scanned, s.Closed, s.SkippedPaid, s.SkippedLocked, s.DeadLettered, s.Elapsed.Seconds())
}

func (s *RunStats) add(p pageResult) {
	s.Closed += p.closed
	s.SkippedPaid += p.paid
	s.SkippedLocked += p.locked
	s.DeadLettered += p.deadLettered
	s.SkippedClosed += p.gone
	s.SkippedNotDue += p.notDue
	s.LockErrors += p.lockErrors
	s.LeaseLost += p.leaseLost
	s.Contended += p.contended
	s.Conflicts += p.conflicts
	s.TradePaid += p.tradePaid
	s.TradeErrors += p.tradeErrors
	s.MaxLateness = max(s.MaxLateness, p.maxLate)
	if s.TradeErr == nil {
		s.TradeErr = p.tradeErr
	}
	if s.LockErr == nil {
		s.LockErr = p.lockErr
	}
}

// Run closes the due orders of one shard, page by page, and returns what it
// did. "Now" is the database clock read once at the start; an order counts as due when status = 0 and create_time +
// timeout_minutes is at or before it.
//
// Cancellation is checked between pages: a page in progress is finished (its
// transaction commits or rolls back whole), then Run returns ctx.Err() with
// the stats so far. Redis failures do not fail the run (the orders concerned
// follow the rule at lockNos); after three consecutive pages whose locks all
// failed, the run stops early (the rest waits for the next run). Callers
// that want such a run reported as failed check LockErr.
//
// Errors are classified before anything is dead-lettered (see dbserver.ErrorKind):
// only an error about one order's rows dead-letters that order, after the
// page is closed again one order at a time to find it. Any other error (a
// missing table, column or privilege, the server read-only, the connection
// lost) stops the run with the error, which dbserver.Hint explains: the page's
// transaction rolled back, nothing is dead-lettered, and the next run tries
// the same orders again. An error writing a dead letter stops the run too.
func (c *Closer) Run(ctx context.Context, opt RunOptions) (RunStats, error) {
	start := time.Now()
	st := RunStats{DryRun: opt.DryRun}
	opt, err := c.normalize(opt)
	if err != nil {
		return st, err
	}
	clock, dbNow, err := c.readClock(ctx)
	if err != nil {
		return st, err
	}
	pace := pacer{rate: opt.MaxPerSecond, start: time.Now()}

	// The scanner prepares the next page (scan, dead-letter filter, Redis
	// locks) while this goroutine closes the current one, so the database
	// work of a page overlaps the round trips of the next. It is stopped and
	// waited for, and the locks of a page it prepared but we did not close
	// are released, before Run returns.
	sctx, stopScan := context.WithCancel(ctx)
	pages := make(chan page)
	var wg sync.WaitGroup
	wg.Go(func() { c.scan(sctx, opt, clock, pages) })
	defer func() {
		stopScan()
		for p := range pages {
			c.release(ctx, p.lease)
		}
		wg.Wait()
	}()

	err = c.closePages(ctx, opt, clock, pace, pages, &st, start)
	st.Elapsed = time.Since(start)
	c.recordRun(ctx, opt, dbNow, st, err)
	if err != nil {
		return st, err
	}
	attrs := []any{"shard_index", opt.ShardIndex, "shard_total", opt.ShardTotal, "dry_run", opt.DryRun,
		"num_scanned", st.Scanned, "num_closed", st.Closed, "num_skipped_paid", st.SkippedPaid,
		"num_skipped_locked", st.SkippedLocked, "num_dead_lettered", st.DeadLettered,
		"num_lock_errors", st.LockErrors, "seconds", st.Elapsed.Seconds()}
	if st.LockErr != nil {
		attrs = append(attrs, "lock_error", st.LockErr.Error())
	}
	if st.TradePaid+st.TradeErrors > 0 {
		attrs = append(attrs, "num_trade_paid", st.TradePaid, "num_trade_errors", st.TradeErrors)
	}
	c.log.InfoContext(ctx, "close run finished", attrs...)
	return st, nil
}

// closePages closes the pages the scanner hands over until it runs out, the
// context is cancelled (checked between pages), or Redis fails for
// maxLockFailedPages pages in a row.
func (c *Closer) closePages(ctx context.Context, opt RunOptions, clock runClock, pace pacer, pages <-chan page, st *RunStats, start time.Time) error {
	redisDown := 0 // consecutive pages whose locks all failed on Redis errors
	for p := range pages {
		if p.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return p.err
		}
		if err := ctx.Err(); err != nil {
			c.release(ctx, p.lease)
			return err
		}
		if err := pace.wait(ctx, st.Closed); err != nil {
			c.release(ctx, p.lease)
			return err
		}
		if !opt.DryRun {
			c.freshLease(ctx, &p)
		}
		st.Pages++
		st.Scanned += len(p.rows)
		var pr pageResult
		var err error
		switch {
		case opt.DryRun:
			pr.closed = len(p.rows)
		case len(p.rows) > 0:
			pr, err = c.closePage(ctx, clock, p)
		}
		st.add(pr)
		c.observePage(ctx, opt, len(p.rows), pr)
		c.log.DebugContext(ctx, "close page", "page", st.Pages, "batch_size", len(p.rows), "num_closed", pr.closed,
			"num_skipped", pr.skipped(), "num_dead_lettered", pr.deadLettered)
		if opt.Progress != nil {
			opt.Progress(PageStats{Page: st.Pages, Scanned: len(p.rows), Closed: pr.closed, Skipped: pr.skipped(),
				Failed: pr.deadLettered, Elapsed: time.Since(start)})
		}
		if err != nil {
			return err
		}
		if pr.lockErrors > 0 && pr.lockErrors == len(p.rows) {
			redisDown++
		} else {
			redisDown = 0
		}
		if redisDown == maxLockFailedPages {
			// Redis is down: every further page would only wait for the
			// lock timeout and skip its orders. Stop; the next run retries.
			c.log.WarnContext(ctx, "order locks failing; run stopped early", "pages", redisDown,
				"error", fmt.Sprint(st.LockErr))
			return nil
		}
	}
	// The scanner stops early only when the run is cancelled.
	return ctx.Err()
}

// Effective is opt as Run applies it: defaults filled in, the page size
// lowered to suit MaxPerSecond. Handlers log it at the start of a run.
func (c *Closer) Effective(opt RunOptions) (RunOptions, error) { return c.normalize(opt) }

func (c *Closer) normalize(opt RunOptions) (RunOptions, error) {
	if opt.ShardTotal <= 0 {
		opt.ShardTotal = 1
	}
	if opt.ShardIndex < 0 || opt.ShardIndex >= opt.ShardTotal {
		return opt, fmt.Errorf("orders: shard index %d out of [0, %d)", opt.ShardIndex, opt.ShardTotal)
	}
	opt.PageSize = cmp.Or(opt.PageSize, c.cfg.PageSize)
	if opt.PageSize < 1 || opt.PageSize > maxPageSize {
		return opt, fmt.Errorf("orders: page size %d out of [1, %d]", opt.PageSize, maxPageSize)
	}
	if opt.MaxOrders < 0 {
		return opt, fmt.Errorf("orders: maxOrders %d is negative", opt.MaxOrders)
	}
	if opt.MaxPerSecond < 0 || math.IsNaN(opt.MaxPerSecond) || math.IsInf(opt.MaxPerSecond, 0) {
		return opt, fmt.Errorf("orders: maxPerSecond %v is not a rate", opt.MaxPerSecond)
	}
	if opt.MaxPerSecond > 0 {
		opt.PageSize = min(opt.PageSize, max(1, int(math.Ceil(opt.MaxPerSecond/10))))
	}
	return opt, nil
}

// runClock is a run's view of time: the database time read at its start
// decides what is due; close timestamps advance from it by the
// local monotonic clock, so they are on the database's clock too.
//
// now is the session's wall clock, which the executor's own tables (dead
// letters, the close log, runs) keep. shop is the same moment as the
// shop's time columns are compared with: now itself for date-time
// columns; for an epoch schema the instant itself, as UTC (both from one
// read of the database clock), which the statements convert to the unit
// (closesql's epoch parameters) and the order rows come back in. The
// order's times are compared with shop only.
type runClock struct {
	now  time.Time // database time at the start of the run
	shop time.Time // the same, in the frame of the shop's time columns
	read time.Time // local (monotonic) time when it was read
}

func (rc runClock) closeTime() time.Time { return rc.now.Add(time.Since(rc.read)) }

// shopCloseTime is closeTime in the frame of the shop's time columns.
func (rc runClock) shopCloseTime() time.Time { return rc.shop.Add(time.Since(rc.read)) }

// readClock reads the database clock for a run (see runClock), shifted by
// c.shift, and the unshifted session time (for the run's record).
func (c *Closer) readClock(ctx context.Context) (runClock, time.Time, error) {
	now, shop, err := c.store.now(ctx, c.db)
	if err != nil {
		return runClock{}, time.Time{}, err
	}
	return runClock{now: now.Add(c.shift), shop: shop.Add(c.shift), read: time.Now()}, now, nil
}

// CloseOrder closes exactly one order, with the same lock, status CAS,
// compensation and dead-letter rules as Run (the delayed-task dispatcher's
// entry point). An order not due yet returns OutcomeNotDue and is left as it
// is; a paid or closed one is skipped. A close that fails is dead-lettered and
// returned as OutcomeDeadLettered with the cause. A parked dead letter is
// respected (OutcomeParked); a waiting one is retried now, since the caller
// asked for this order explicitly. A lock not taken follows the rule at
// lockNos (OutcomeSkippedLocked, with the Redis error if Redis failed);
// rows held by other transactions through every lock attempt give
// OutcomeSkippedLocked with that error (dbserver.KindContention). With a TradeCloser, the payment side is asked
// first: "already paid" returns OutcomeSkippedPaid, a failed call
// OutcomeSkippedLocked with the error.
//
// Only an error about the order's own rows (dbserver.KindOrder) dead-letters it. An
// error about the database (a missing table or privilege, the server
// read-only or unreachable: see dbserver.ErrorKind) returns outcome 0 and the error,
// writes no dead letter and changes nothing; dbserver.NotNow(err) is true for it.
func (c *Closer) CloseOrder(ctx context.Context, orderNo string) (out Outcome, err error) {
	defer func() { c.observeOne(ctx, out, err) }()
	clock, _, err := c.readClock(ctx)
	if err != nil {
		return 0, err
	}
	o, err := c.store.orderByNo(ctx, c.db, orderNo)
	switch {
	case err != nil:
		return 0, err
	case o == nil:
		return OutcomeNotFound, nil
	case o.Status == orderstatus.Paid:
		return OutcomeSkippedPaid, nil
	case o.Status != orderstatus.Unpaid:
		return OutcomeSkippedClosed, nil
	case !o.due(clock.shop):
		return OutcomeNotDue, nil
	}
	dl, err := c.store.deadLetterStatus(ctx, c.db, orderNo)
	if err != nil {
		return 0, err
	}
	if dl == deadletters.Parked {
		return OutcomeParked, nil
	}

	lease, lerr := c.lockNos(ctx, []string{orderNo})
	defer c.release(ctx, lease)
	wctx, cancel := c.pageCtx(ctx, lease)
	defer cancel()
	if !lease.Held(orderNo) {
		if lease.Failed(orderNo) {
			return OutcomeSkippedLocked, fmt.Errorf("close order %s: %w", orderNo, lerr)
		}
		return OutcomeSkippedLocked, nil
	}
	if out, done, err := c.tradeStepOne(wctx, clock, *o, lease); done {
		return out, err
	}
	var pd pageData
	if dl == deadletters.Waiting {
		pd.letters = map[string]bool{orderNo: true}
	}
	res, err := c.closeOne(wctx, clock, o.scanRow, pd, lease)
	if err != nil {
		return 0, err
	}
	if res.outcome == OutcomeDeadLettered {
		return res.outcome, res.cause
	}
	if res.contended {
		return res.outcome, fmt.Errorf("close order %s: %w", orderNo, res.cause)
	}
	return res.outcome, nil
}

// release gives the lease back without the caller's cancellation, so a
// cancelled run still frees its locks; a failure only delays other holders
// until the TTL, so it is logged, not returned.
func (c *Closer) release(ctx context.Context, lease *orderlock.Lease) {
	if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
		c.log.WarnContext(ctx, "release order locks", "num_locks", lease.Len(), "error", err.Error())
	}
}

// inTx runs fn in a READ COMMITTED transaction on the Closer's database
// (sqlexec.InTx says why that level).
func (c *Closer) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) (err error) {
	// A close transaction changes only the database: after a failover it
	// is run again on a fresh connection rather than failing the run on a
	// pooled one to the old primary. Its lock waits end with its context
	// (dbserver.CapLockWait says why).
	return sqlexec.InTxAgainOnStaleConn(ctx, c.db, func(tx *sqlx.Tx) error {
		if err := c.cfg.Server.CapLockWait(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	})
}
