package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/orderstatus"
)

// Order lifecycle after payment (order_info.status):
//
//	0 unpaid ──pay──► 1 paid ──ship──► 3 shipped ──confirm / auto-confirm──► 4 completed
//	   └──timeout close──► 2 closed      │
//	                                     └─ not shipped within fulfillment_timeout_days:
//	                                        flagged in order_fulfillment_overdue (no state change)
//
// pay_time, ship_time and complete_time record the database time of each
// step. The order service ships (Service.Ship) and the buyer confirms
// (Service.Confirm); the jobs complete what buyers did not confirm and flag
// what merchants did not ship.

// Lifecycle limits.
const (
	// defaultAutoConfirmDays and defaultFulfillmentTimeoutDays are the
	// defaults of config order.timeout.
	defaultAutoConfirmDays        = 14
	defaultFulfillmentTimeoutDays = 7
	// MaxLifecycleDays bounds both day settings.
	MaxLifecycleDays = 3650
)

// ErrOrderState means the order is not in the status the step needs (e.g.
// shipping an unpaid order).
var ErrOrderState = errors.New("orders: order is not in the status this step needs")

// LifecycleConfig configures a Lifecycle. Zero values take the defaults
// given.
type LifecycleConfig struct {
	// Logger receives one info line per run. Default: discard.
	Logger *slog.Logger
	// AutoConfirmDays: shipped orders are completed this many days after
	// ship_time. Default 14 (order.timeout.auto_confirm_days).
	AutoConfirmDays int
	// FulfillmentTimeoutDays: paid orders not shipped this many days after
	// pay_time are flagged. Default 7 (order.timeout.fulfillment_timeout_days).
	FulfillmentTimeoutDays int
	// PageSize is the default scan page, used when LifecycleOptions.PageSize
	// is zero. Default 500, at most 5000.
	PageSize int
	// Observer receives each run's result, for metrics. Default: none.
	Observer LifecycleObserver
}

// The job names a LifecycleObserver is given.
const (
	JobAutoConfirm        = "auto_confirm"        // AutoConfirm (orderAutoConfirmJob)
	JobFulfillmentTimeout = "fulfillment_timeout" // FlagOverdue (orderFulfillmentTimeoutJob)
)

// LifecycleObserver receives what the lifecycle jobs did. It is called on
// the run's goroutine when a run returns, so it must be cheap.
type LifecycleObserver interface {
	// LifecycleRun reports one run of job (JobAutoConfirm or
	// JobFulfillmentTimeout): its stats (possibly partial) and its error,
	// nil when it succeeded.
	LifecycleRun(ctx context.Context, job string, st LifecycleStats, err error)
}

// Lifecycle runs the jobs of the order lifecycle after payment:
// AutoConfirm (orderAutoConfirmJob) and FlagOverdue
// (orderFulfillmentTimeoutJob). Both judge time by the database clock, read
// once per run, walk their index in keyset pages, and are safe to run
// concurrently, on the same or other shards, in this process or others:
// every change is a conditional statement that repeats what the scan saw.
type Lifecycle struct {
	db    *sqlx.DB
	store store
	cfg   LifecycleConfig
	log   *slog.Logger
}

// PageSize is the page size a run with LifecycleOptions.PageSize n uses.
func (l *Lifecycle) PageSize(n int) int { return cmp.Or(n, l.cfg.PageSize) }

// NewLifecycle checks cfg and returns a Lifecycle over db (a DSN with
// parseTime=true&loc=UTC, like the Closer's).
func NewLifecycle(db *sqlx.DB, cfg LifecycleConfig) (*Lifecycle, error) {
	if db == nil {
		return nil, errors.New("orders: NewLifecycle needs a database")
	}
	cfg.AutoConfirmDays = cmp.Or(cfg.AutoConfirmDays, defaultAutoConfirmDays)
	cfg.FulfillmentTimeoutDays = cmp.Or(cfg.FulfillmentTimeoutDays, defaultFulfillmentTimeoutDays)
	cfg.PageSize = cmp.Or(cfg.PageSize, 500)
	if err := checkDays("auto-confirm days", cfg.AutoConfirmDays); err != nil {
		return nil, err
	}
	if err := checkDays("fulfillment timeout days", cfg.FulfillmentTimeoutDays); err != nil {
		return nil, err
	}
	if cfg.PageSize < 1 || cfg.PageSize > maxPageSize {
		return nil, fmt.Errorf("orders: page size %d out of [1, %d]", cfg.PageSize, maxPageSize)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lifecycle{db: db, cfg: cfg, log: log.With("component", "orders.lifecycle")}, nil
}

func checkDays(what string, d int) error {
	if d < 1 || d > MaxLifecycleDays {
		return fmt.Errorf("orders: %s %d out of [1, %d]", what, d, MaxLifecycleDays)
	}
	return nil
}

// LifecycleOptions are one lifecycle run's parameters (the job param and
// sharding).
type LifecycleOptions struct {
	// ShardIndex and ShardTotal select the orders with id % total = index.
	// Total 0 or 1 takes every order.
	ShardIndex, ShardTotal int
	// Days overrides the configured AutoConfirmDays or
	// FulfillmentTimeoutDays for this run (1-3650). 0: the configured value.
	Days int
	// PageSize is the scan page and update batch size. 0: the Lifecycle's.
	PageSize int
	// MaxOrders caps the orders handled (scanned) in this run. 0: no cap.
	MaxOrders int
	// DryRun scans and counts the orders that would change (in Changed)
	// without changing anything.
	DryRun bool
	// Progress, if set, is called after each page, on the run's goroutine.
	Progress func(LifecyclePage)
}

// LifecyclePage is what one page did.
type LifecyclePage struct {
	Page    int           // 1-based
	Scanned int           // orders the page's scan returned
	Changed int           // completed or flagged (dry run: would be)
	Skipped int           // changed by someone else between scan and update
	Elapsed time.Duration // since the run started
}

// LifecycleStats is what a lifecycle run did. Every scanned order is
// counted in Changed or Skipped.
type LifecycleStats struct {
	Scanned int       // due orders the scan returned
	Changed int       // completed (AutoConfirm) or flagged (FlagOverdue); dry run: would be
	Skipped int       // no longer due when updated: changed meanwhile, or taken by a concurrent run
	Days    int       // the days the run used
	Now     time.Time // the database time the run judged by
	Cutoff  time.Time // Now minus Days: orders at or before it were due
	Pages   int
	Elapsed time.Duration
	DryRun  bool

	verb string // "completed" or "flagged", for String
}

// String renders the summary line, e.g.
// scanned=N completed=N skipped=N days=14 seconds=S.
func (s LifecycleStats) String() string {
	return fmt.Sprintf("scanned=%d %s=%d skipped=%d days=%d seconds=%.3f",
		s.Scanned, cmp.Or(s.verb, "changed"), s.Changed, s.Skipped, s.Days, s.Elapsed.Seconds())
}

// AutoConfirm completes shipped orders (status 3) whose ship_time is at
// least the configured (or opt.Days) number of days before the database
// clock: status 3 → 4 with complete_time, by a CAS per page that repeats
// the scan's condition, so each order is completed once however many runs
// overlap. Orders shipped without a ship_time are never auto-confirmed.
// Cancellation is checked between pages.
func (l *Lifecycle) AutoConfirm(ctx context.Context, opt LifecycleOptions) (LifecycleStats, error) {
	return l.run(ctx, opt, lifecycleJob{
		name: "auto-confirm", metric: JobAutoConfirm, verb: "completed", days: l.cfg.AutoConfirmDays,
		scan: l.store.scanShipped,
		change: func(ctx context.Context, ids []int64, _ int, cutoff time.Time) (int64, error) {
			return l.store.completeOrders(ctx, l.db, ids, cutoff)
		},
	})
}

// FlagOverdue flags paid orders (status 1) not shipped within the
// configured (or opt.Days) number of days after pay_time: one row per order
// in order_fulfillment_overdue (unique order_no), written once, for the
// merchant side to act on. It never changes an order. Orders paid before
// pay_time existed (NULL) are never flagged. Cancellation is checked
// between pages.
func (l *Lifecycle) FlagOverdue(ctx context.Context, opt LifecycleOptions) (LifecycleStats, error) {
	return l.run(ctx, opt, lifecycleJob{
		name: "fulfillment timeout", metric: JobFulfillmentTimeout, verb: "flagged", days: l.cfg.FulfillmentTimeoutDays,
		scan: l.store.scanOverdue,
		change: func(ctx context.Context, ids []int64, days int, cutoff time.Time) (int64, error) {
			return l.store.flagOverdue(ctx, l.db, ids, days, cutoff)
		},
	})
}

// lifecycleJob is what differs between the two jobs.
type lifecycleJob struct {
	name, verb string
	metric     string // the job's name for the Observer
	days       int    // configured default
	scan       func(ctx context.Context, q sqlx.QueryerContext, cur lifecycleCursor, cutoff time.Time, shardIndex, shardTotal, limit int) ([]lifecycleRow, error)
	change     func(ctx context.Context, ids []int64, days int, cutoff time.Time) (int64, error)
}

func (l *Lifecycle) run(ctx context.Context, opt LifecycleOptions, job lifecycleJob) (st LifecycleStats, err error) {
	start := time.Now()
	st = LifecycleStats{DryRun: opt.DryRun, verb: job.verb}
	if l.cfg.Observer != nil {
		defer func() { l.cfg.Observer.LifecycleRun(ctx, job.metric, st, err) }()
	}
	if opt.ShardTotal <= 0 {
		opt.ShardTotal = 1
	}
	if opt.ShardIndex < 0 || opt.ShardIndex >= opt.ShardTotal {
		return st, fmt.Errorf("orders: shard index %d out of [0, %d)", opt.ShardIndex, opt.ShardTotal)
	}
	st.Days = cmp.Or(opt.Days, job.days)
	if err := checkDays(job.name+" days", st.Days); err != nil {
		return st, err
	}
	opt.PageSize = l.PageSize(opt.PageSize)
	if opt.PageSize < 1 || opt.PageSize > maxPageSize {
		return st, fmt.Errorf("orders: page size %d out of [1, %d]", opt.PageSize, maxPageSize)
	}
	if opt.MaxOrders < 0 {
		return st, fmt.Errorf("orders: maxOrders %d is negative", opt.MaxOrders)
	}
	now, err := sqlexec.Now(ctx, l.db)
	if err != nil {
		return st, err
	}
	st.Now = now
	// Calendar days on the wall clock (the values are zone-less DATETIMEs).
	st.Cutoff = now.AddDate(0, 0, -st.Days)

	cur := lifecycleCursor{At: firstCursor.CreateTime, ID: -1}
	for {
		if err := ctx.Err(); err != nil {
			st.Elapsed = time.Since(start)
			return st, err
		}
		limit := opt.PageSize
		if opt.MaxOrders > 0 {
			left := opt.MaxOrders - st.Scanned
			if left <= 0 {
				break
			}
			limit = min(limit, left)
		}
		rows, err := job.scan(ctx, l.db, cur, st.Cutoff, opt.ShardIndex, opt.ShardTotal, limit)
		if err != nil {
			st.Elapsed = time.Since(start)
			return st, err
		}
		if len(rows) == 0 {
			break
		}
		st.Pages++
		st.Scanned += len(rows)
		last := rows[len(rows)-1]
		cur = lifecycleCursor{At: last.At, ID: last.ID}
		p := LifecyclePage{Page: st.Pages, Scanned: len(rows)}
		if opt.DryRun {
			p.Changed = len(rows)
		} else {
			// The page's statement runs without the caller's cancellation,
			// so a cancelled run never leaves its last page unreported.
			n, err := job.change(context.WithoutCancel(ctx), lifecycleIDs(rows), st.Days, st.Cutoff)
			if err != nil {
				st.Elapsed = time.Since(start)
				return st, err
			}
			p.Changed, p.Skipped = int(n), len(rows)-int(n)
		}
		st.Changed += p.Changed
		st.Skipped += p.Skipped
		p.Elapsed = time.Since(start)
		l.log.DebugContext(ctx, job.name+" page", "page", p.Page, "batch_size", p.Scanned, "num_"+job.verb, p.Changed)
		if opt.Progress != nil {
			opt.Progress(p)
		}
		if len(rows) < limit {
			break
		}
	}
	st.Elapsed = time.Since(start)
	l.log.InfoContext(ctx, job.name+" run finished", "shard_index", opt.ShardIndex, "shard_total", opt.ShardTotal,
		"dry_run", opt.DryRun, "days", st.Days, "cutoff", st.Cutoff.Format(oplist.WallTimeLayout),
		"num_scanned", st.Scanned, "num_"+job.verb, st.Changed, "num_skipped", st.Skipped, "seconds", st.Elapsed.Seconds())
	return st, nil
}

// Ship records that a paid order was shipped: status 1 → 3 with ship_time
// (database clock), by CAS. It reports whether this call shipped it: false
// with no error when it was shipped (or completed) already, so a retried
// call is harmless. ErrOrderNotFound for an unknown order, ErrOrderState
// (wrapped, with the status) for an order that is not paid.
func (s *Service) Ship(ctx context.Context, orderNo string) (bool, error) {
	return s.step(ctx, orderNo, "ship", s.store.shipOrder, orderstatus.Shipped, orderstatus.Completed)
}

// Confirm records that the buyer confirmed receipt: status 3 → 4 with
// complete_time, by CAS. It reports whether this call completed it: false
// with no error when it was completed already. ErrOrderNotFound for an
// unknown order, ErrOrderState (wrapped) for an order that is not shipped.
func (s *Service) Confirm(ctx context.Context, orderNo string) (bool, error) {
	return s.step(ctx, orderNo, "confirm", s.store.confirmOrder, orderstatus.Completed)
}

// step runs one lifecycle CAS and explains a CAS that changed nothing.
func (s *Service) step(ctx context.Context, orderNo, what string, cas func(context.Context, sqlx.ExecerContext, string) (int64, error), done ...int) (bool, error) {
	n, err := cas(ctx, s.db, orderNo)
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	st, ok, err := s.store.orderStatus(ctx, s.db, orderNo)
	switch {
	case err != nil:
		return false, err
	case !ok:
		return false, fmt.Errorf("%s order %s: %w", what, orderNo, ErrOrderNotFound)
	}
	for _, d := range done {
		if st == d {
			return false, nil
		}
	}
	return false, fmt.Errorf("%s order %s: status %d: %w", what, orderNo, st, ErrOrderState)
}
