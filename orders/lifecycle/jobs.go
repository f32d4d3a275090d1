package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/oplist"
)

// Limits.
const (
	// DefaultAutoConfirmDays and DefaultFulfillmentTimeoutDays are
	// Config's defaults and the executor's order.timeout defaults (config
	// takes them from here).
	DefaultAutoConfirmDays        = 14
	DefaultFulfillmentTimeoutDays = 7
	// MaxDays bounds both day settings.
	MaxDays = 3650
	// DefaultPageSize is Config.PageSize when zero: the close's default
	// (orders.DefaultPageSize), which this leaf cannot import; the
	// executor passes order.close.pageSize either way.
	DefaultPageSize = 500
	// maxPageSize bounds the page size, as it does the close's.
	maxPageSize = 5000
)

// Config configures Jobs. Zero values take the defaults
// given.
type Config struct {
	// Logger receives one info line per run. Default: discard.
	Logger *slog.Logger
	// AutoConfirmDays: shipped orders are completed this many days after
	// ship_time. Default 14 (order.timeout.auto_confirm_days).
	AutoConfirmDays int
	// FulfillmentTimeoutDays: paid orders not shipped this many days after
	// pay_time are flagged. Default 7 (order.timeout.fulfillment_timeout_days).
	FulfillmentTimeoutDays int
	// PageSize is the default scan page, used when Options.PageSize
	// is zero. Default 500, at most 5000.
	PageSize int
	// Observer receives each run's result, for metrics. Default: none.
	Observer Observer
	// Source names the order database db is (an order.sources item), for
	// the run log and the metrics. Default "default": the one database of
	// a deployment without order.sources.
	Source string
	// Table is the order table the jobs work on, one of the source's
	// (order.sources: order_info_0, ...). Default order_info.
	Table string
	// Unreachable reports whether an error of a run says the database
	// cannot be reached: a Sweep then fails the source's other units
	// without trying each. Default: no error does.
	Unreachable func(error) bool
}

// Defaults of Config.Source and Config.Table.
const (
	DefaultSource = "default"
	defaultTable  = "order_info"
)

// plainTable is what Config.Table may be: the statements name it as it is.
var plainTable = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// The job names a Observer is given.
const (
	JobAutoConfirm        = "auto_confirm"        // AutoConfirm (orderAutoConfirmJob)
	JobFulfillmentTimeout = "fulfillment_timeout" // FlagOverdue (orderFulfillmentTimeoutJob)
)

// Observer receives what the lifecycle jobs did. It is called on
// the run's goroutine when a run returns, so it must be cheap.
type Observer interface {
	// LifecycleUnit is called once by New with the Jobs' source and
	// table, before any run: the unit's series can exist from the start.
	LifecycleUnit(source, table string)
	// LifecycleRun reports one run of job (JobAutoConfirm or
	// JobFulfillmentTimeout) on one unit, the order table of a source: its
	// stats (possibly partial) and its error, nil when it succeeded.
	LifecycleRun(ctx context.Context, job, source, table string, st Stats, err error)
}

// Jobs runs the jobs of the order lifecycle after payment:
// AutoConfirm (orderAutoConfirmJob) and FlagOverdue
// (orderFulfillmentTimeoutJob). Both judge time by the database clock, read
// once per run, walk their index in keyset pages, and are safe to run
// concurrently, on the same or other shards, in this process or others:
// every change is a conditional statement that repeats what the scan saw.
type Jobs struct {
	db    *sqlx.DB
	store store
	cfg   Config
	log   *slog.Logger
}

// Source is the order database the jobs work in (Config.Source).
func (l *Jobs) Source() string { return l.cfg.Source }

// Table is the order table the jobs work on (Config.Table).
func (l *Jobs) Table() string { return l.cfg.Table }

// PageSize is the page size a run with Options.PageSize n uses.
func (l *Jobs) PageSize(n int) int { return cmp.Or(n, l.cfg.PageSize) }

// New checks cfg and returns Jobs over db (a DSN with
// parseTime=true&loc=UTC, like the Closer's).
func New(db *sqlx.DB, cfg Config) (*Jobs, error) {
	if db == nil {
		return nil, errors.New("lifecycle: New needs a database")
	}
	cfg.AutoConfirmDays = cmp.Or(cfg.AutoConfirmDays, DefaultAutoConfirmDays)
	cfg.FulfillmentTimeoutDays = cmp.Or(cfg.FulfillmentTimeoutDays, DefaultFulfillmentTimeoutDays)
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	cfg.Source = cmp.Or(cfg.Source, DefaultSource)
	cfg.Table = cmp.Or(cfg.Table, defaultTable)
	if !plainTable.MatchString(cfg.Table) {
		return nil, fmt.Errorf("lifecycle: order table %q is not a plain table name", cfg.Table)
	}
	if err := checkDays("auto-confirm days", cfg.AutoConfirmDays); err != nil {
		return nil, err
	}
	if err := checkDays("fulfillment timeout days", cfg.FulfillmentTimeoutDays); err != nil {
		return nil, err
	}
	if cfg.PageSize < 1 || cfg.PageSize > maxPageSize {
		return nil, fmt.Errorf("lifecycle: page size %d out of [1, %d]", cfg.PageSize, maxPageSize)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer != nil {
		cfg.Observer.LifecycleUnit(cfg.Source, cfg.Table)
	}
	return &Jobs{db: db, cfg: cfg, store: newStore(cfg.Table),
		log: log.With("component", "orders.lifecycle", "source", cfg.Source, "table", cfg.Table)}, nil
}

func checkDays(what string, d int) error {
	if d < 1 || d > MaxDays {
		return fmt.Errorf("lifecycle: %s %d out of [1, %d]", what, d, MaxDays)
	}
	return nil
}

// Options are one lifecycle run's parameters (the job param and
// sharding).
type Options struct {
	// ShardIndex and ShardTotal select the orders of one shard (shard.Of(id, total) = index).
	// Total 0 or 1 takes every order.
	ShardIndex, ShardTotal int
	// Days overrides the configured AutoConfirmDays or
	// FulfillmentTimeoutDays for this run (1-3650). 0: the configured value.
	Days int
	// PageSize is the scan page and update batch size. 0: the Jobs'
	// (Config.PageSize).
	PageSize int
	// MaxOrders caps the orders handled (scanned) in this run. 0: no cap.
	MaxOrders int
	// DryRun scans and counts the orders that would change (in Changed)
	// without changing anything.
	DryRun bool
	// Progress, if set, is called after each page, on the run's goroutine.
	Progress func(Page)
}

// Page is what one page did.
type Page struct {
	Page    int           // 1-based
	Scanned int           // orders the page's scan returned
	Changed int           // completed or flagged (dry run: would be)
	Skipped int           // changed by someone else between scan and update
	Elapsed time.Duration // since the run started
}

// Stats is what a lifecycle run did. Every scanned order is
// counted in Changed or Skipped.
type Stats struct {
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
func (s Stats) String() string {
	return fmt.Sprintf("scanned=%d %s=%d skipped=%d days=%d seconds=%.3f",
		s.Scanned, cmp.Or(s.verb, "changed"), s.Changed, s.Skipped, s.Days, s.Elapsed.Seconds())
}

// AutoConfirm completes shipped orders (status 3) whose ship_time is at
// least the configured (or opt.Days) number of days before the database
// clock: status 3 → 4 with complete_time, by a CAS per page that repeats
// the scan's condition, so each order is completed once however many runs
// overlap. Orders shipped without a ship_time are never auto-confirmed.
// Cancellation is checked between pages.
func (l *Jobs) AutoConfirm(ctx context.Context, opt Options) (Stats, error) {
	return l.run(ctx, opt, jobSpec{
		name: "auto-confirm", metric: JobAutoConfirm, verb: "completed", days: l.cfg.AutoConfirmDays,
		scan: l.store.scanShipped,
		change: func(ctx context.Context, ids []int64, _ int, cutoff time.Time) (int64, error) {
			return l.store.completeOrders(ctx, l.db, ids, cutoff)
		},
	})
}

// FlagOverdue flags paid orders (status 1) not shipped within the
// configured (or opt.Days) number of days after pay_time: one row per order
// in order_fulfillment_overdue (unique order_no), naming the Jobs' table
// (order_table), written once, for the merchant side to act on. It never
// changes an order. Orders paid before
// pay_time existed (NULL) are never flagged. Cancellation is checked
// between pages.
func (l *Jobs) FlagOverdue(ctx context.Context, opt Options) (Stats, error) {
	return l.run(ctx, opt, jobSpec{
		name: "fulfillment timeout", metric: JobFulfillmentTimeout, verb: "flagged", days: l.cfg.FulfillmentTimeoutDays,
		scan: l.store.scanOverdue,
		change: func(ctx context.Context, ids []int64, days int, cutoff time.Time) (int64, error) {
			return l.store.flagOverdue(ctx, l.db, ids, days, cutoff)
		},
	})
}

// jobSpec is what differs between the two jobs.
type jobSpec struct {
	name, verb string
	metric     string // the job's name for the Observer
	days       int    // configured default
	scan       func(ctx context.Context, q sqlx.QueryerContext, cur cursor, cutoff time.Time, shardIndex, shardTotal, limit int) ([]row, error)
	change     func(ctx context.Context, ids []int64, days int, cutoff time.Time) (int64, error)
}

func (l *Jobs) run(ctx context.Context, opt Options, job jobSpec) (st Stats, err error) {
	start := time.Now()
	st = Stats{DryRun: opt.DryRun, verb: job.verb}
	if l.cfg.Observer != nil {
		defer func() { l.cfg.Observer.LifecycleRun(ctx, job.metric, l.cfg.Source, l.cfg.Table, st, err) }()
	}
	if opt, err = l.checkOptions(opt, job, &st); err != nil {
		return st, err
	}
	now, err := sqlexec.Now(ctx, l.db)
	if err != nil {
		return st, err
	}
	st.Now = now
	// Calendar days on the wall clock (the values are zone-less DATETIMEs).
	st.Cutoff = now.AddDate(0, 0, -st.Days)

	err = l.sweep(ctx, opt, job, &st, start)
	st.Elapsed = time.Since(start)
	if err != nil {
		return st, err
	}
	l.log.InfoContext(ctx, job.name+" run finished", "shard_index", opt.ShardIndex, "shard_total", opt.ShardTotal,
		"dry_run", opt.DryRun, "days", st.Days, "cutoff", st.Cutoff.Format(oplist.WallTimeLayout),
		"num_scanned", st.Scanned, "num_"+job.verb, st.Changed, "num_skipped", st.Skipped, "seconds", st.Elapsed.Seconds())
	return st, nil
}

// checkOptions fills opt's defaults (one shard, the configured page size)
// and st.Days (opt.Days or the job's configured days), and rejects a shard,
// day count, page size or order limit out of range.
func (l *Jobs) checkOptions(opt Options, job jobSpec, st *Stats) (Options, error) {
	if opt.ShardTotal <= 0 {
		opt.ShardTotal = 1
	}
	if opt.ShardIndex < 0 || opt.ShardIndex >= opt.ShardTotal {
		return opt, fmt.Errorf("lifecycle: shard index %d out of [0, %d)", opt.ShardIndex, opt.ShardTotal)
	}
	st.Days = cmp.Or(opt.Days, job.days)
	if err := checkDays(job.name+" days", st.Days); err != nil {
		return opt, err
	}
	opt.PageSize = l.PageSize(opt.PageSize)
	if opt.PageSize < 1 || opt.PageSize > maxPageSize {
		return opt, fmt.Errorf("lifecycle: page size %d out of [1, %d]", opt.PageSize, maxPageSize)
	}
	if opt.MaxOrders < 0 {
		return opt, fmt.Errorf("lifecycle: maxOrders %d is negative", opt.MaxOrders)
	}
	return opt, nil
}

// sweep walks the due orders page by page from the start of the keyset
// (st.Cutoff set), changing each page (or counting it on a dry run), until a
// short page, opt.MaxOrders scanned, an error or ctx's end.
func (l *Jobs) sweep(ctx context.Context, opt Options, job jobSpec, st *Stats, start time.Time) error {
	cur := cursor{At: sqlexec.Earliest, ID: -1}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		limit := opt.PageSize
		if opt.MaxOrders > 0 {
			left := opt.MaxOrders - st.Scanned
			if left <= 0 {
				return nil
			}
			limit = min(limit, left)
		}
		rows, err := job.scan(ctx, l.db, cur, st.Cutoff, opt.ShardIndex, opt.ShardTotal, limit)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		last := rows[len(rows)-1]
		cur = cursor{At: last.At, ID: last.ID}
		if err := l.changePage(ctx, opt, job, st, rows, start); err != nil {
			return err
		}
		if len(rows) < limit {
			return nil
		}
	}
}

// changePage changes one scanned page (or counts it on a dry run), adds it
// to st, logs it and reports it to opt.Progress.
func (l *Jobs) changePage(ctx context.Context, opt Options, job jobSpec, st *Stats, rows []row, start time.Time) error {
	st.Pages++
	st.Scanned += len(rows)
	p := Page{Page: st.Pages, Scanned: len(rows)}
	if opt.DryRun {
		p.Changed = len(rows)
	} else {
		// The page's statement runs without the caller's cancellation,
		// so a cancelled run never leaves its last page unreported.
		n, err := job.change(context.WithoutCancel(ctx), rowIDs(rows), st.Days, st.Cutoff)
		if err != nil {
			return err
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
	return nil
}
