package orders

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/shard"
)

// DefaultSourceName is CloserConfig.SourceName when none is given: the one
// order database of a deployment without order.sources.
const DefaultSourceName = "default"

// Source is the name of the order database c closes in.
func (c *Closer) Source() string { return c.cfg.SourceName }

// Table is the order table c closes in.
func (c *Closer) Table() string { return c.cfg.Schema.Orders.Table }

// Sweep closes the due orders of many units, each an order table of one
// source database with the Closer for it, in one run: the job of
// orderTimeoutCloseJob when orders are split over databases and tables
// (docs/sharded-orders.md). A Sweep of one Closer runs exactly as that
// Closer's Run. Safe for concurrent use.
type Sweep struct {
	units []*Closer
}

// NewSweep returns the sweep over units, in the order given (the order
// shard.Assign hands them out in); each (source, table) at most once.
func NewSweep(units ...*Closer) (*Sweep, error) {
	if len(units) == 0 {
		return nil, errors.New("orders: a sweep needs at least one unit")
	}
	seen := map[[2]string]bool{}
	for _, c := range units {
		if c == nil {
			return nil, errors.New("orders: a sweep's unit has no Closer")
		}
		k := [2]string{c.Source(), c.Table()}
		if seen[k] {
			return nil, fmt.Errorf("orders: unit %s/%s given twice", k[0], k[1])
		}
		seen[k] = true
	}
	return &Sweep{units: units}, nil
}

// Units are the sweep's Closers, in order.
func (s *Sweep) Units() []*Closer { return s.units }

// Effective is opt as the units' Run applies it (Closer.Effective of the
// first unit: every unit of a process shares the close settings).
func (s *Sweep) Effective(opt RunOptions) (RunOptions, error) { return s.units[0].Effective(opt) }

// UnitResult is one unit's share of a sweep and what it did; S is the
// stats of the unit's run (RunStats for the close, RetryStats for the
// dead-letter retry).
type UnitResult[S any] struct {
	Source, Table string
	// Share is the unit's rows this executor took: all of them, or the
	// rows of one row shard (shard.Assign).
	Share shard.Share
	Stats S
	// Err is what stopped the unit's run; for a unit never started (its
	// source unreachable, the sweep cancelled) it says why.
	Err error
	// Started is false for a unit whose run was not started.
	Started bool
}

// UnitRun is one unit's share of a close sweep and what it did.
type UnitRun = UnitResult[RunStats]

// Name is the unit as the run log and messages write it: source/table.
func (u UnitResult[S]) Name() string { return u.Source + "/" + u.Table }

// SweepOptions are a sweep's parameters: RunOptions, whose ShardIndex and
// ShardTotal are this executor among the broadcast's (shard.Assign turns
// them into each unit's share), MaxOrders and MaxPerSecond are split over
// the units and sources (below), and whose Progress is not used.
type SweepOptions struct {
	RunOptions
	// UnitProgress, if set, is called after each page of a unit; UnitDone
	// after each unit's run. Calls never overlap, whatever goroutine makes
	// them.
	UnitProgress func(u UnitRun, p PageStats)
	UnitDone     func(u UnitRun)
}

// UnitsResult is what a sweep did: every unit's run, and their sum.
type UnitsResult[S any] struct {
	Units []UnitResult[S] // the shares this executor took, in unit order
	Total S               // the units' stats added up; Elapsed is the sweep's
}

// SweepResult is what a close sweep did.
type SweepResult = UnitsResult[RunStats]

// Failed are the units whose run an error stopped.
func (r UnitsResult[S]) Failed() []UnitResult[S] {
	var out []UnitResult[S]
	for _, u := range r.Units {
		if u.Err != nil {
			out = append(out, u)
		}
	}
	return out
}

// Err is the first unit's error joined with a count of the others, nil
// when every unit ran to its end.
func (r UnitsResult[S]) Err() error {
	f := r.Failed()
	switch len(f) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: %w", f[0].Name(), f[0].Err)
	}
	return fmt.Errorf("%d of %d units failed, first %s: %w", len(f), len(r.Units), f[0].Name(), f[0].Err)
}

// Run runs this executor's share of every unit: one goroutine per source
// database, each running its units one after the other, so sources close
// in parallel, each within its own pool. A unit's error fails that unit
// and no other; an error saying its database cannot be reached
// (KindConnection) also fails the source's units not yet started, without
// trying each. MaxOrders is split evenly over the executor's units,
// MaxPerSecond over its sources. Run returns when every goroutine has.
func (s *Sweep) Run(ctx context.Context, opt SweepOptions) SweepResult {
	start := time.Now()
	shares := shard.Assign(len(s.units), opt.ShardIndex, opt.ShardTotal)
	units, sources := unitsBySource[RunStats](s.units, shares)
	res := SweepResult{Units: units}
	unitOpt := opt.RunOptions
	if opt.MaxOrders > 0 && len(shares) > 0 {
		unitOpt.MaxOrders = int(math.Ceil(float64(opt.MaxOrders) / float64(len(shares))))
	}
	if opt.MaxPerSecond > 0 && len(sources) > 0 {
		unitOpt.MaxPerSecond = opt.MaxPerSecond / float64(len(sources))
	}
	var mu sync.Mutex // serializes the callbacks
	runBySource(ctx, s.units, sources, res.Units, &mu, func(c *Closer, u *UnitRun) (RunStats, error) {
		ro := unitOpt
		ro.ShardIndex, ro.ShardTotal = u.Share.RowIndex, u.Share.RowTotal
		if opt.UnitProgress != nil {
			ro.Progress = func(p PageStats) {
				mu.Lock()
				defer mu.Unlock()
				opt.UnitProgress(*u, p)
			}
		}
		return c.Run(ctx, ro)
	}, opt.UnitDone)
	for _, u := range res.Units {
		res.Total.merge(u.Stats)
	}
	res.Total.DryRun = opt.DryRun
	res.Total.Elapsed = time.Since(start)
	return res
}

// sourceKey is a source database: its name and pool. The pool tells a
// source from mysql.dsn's Closer added to a retry under the same name.
type sourceKey struct {
	name string
	db   *sqlx.DB
}

// unitsBySource makes the result of each share, in share order, and
// groups the shares by source database: each group the indexes of its
// shares in order, the groups in the order of their first share.
func unitsBySource[S any](units []*Closer, shares []shard.Share) ([]UnitResult[S], [][]int) {
	res := make([]UnitResult[S], len(shares))
	group := map[sourceKey]int{}
	var groups [][]int
	for i, sh := range shares {
		c := units[sh.Unit]
		res[i] = UnitResult[S]{Source: c.Source(), Table: c.Table(), Share: sh}
		k := sourceKey{c.Source(), c.db}
		g, ok := group[k]
		if !ok {
			g = len(groups)
			group[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return res, groups
}

// runBySource runs run for the unit of every share, one goroutine per
// source database (a group of unitsBySource), each running its units one
// after the other, and writes each one's result into res. A unit's error
// fails that unit and no other; an error saying its database cannot be
// reached (KindConnection) also fails the source's units not yet started,
// without trying each. done, if set, is called after each unit under mu.
// It returns when every goroutine has.
func runBySource[S any](ctx context.Context, units []*Closer, groups [][]int, res []UnitResult[S], mu *sync.Mutex,
	run func(c *Closer, u *UnitResult[S]) (S, error), done func(UnitResult[S])) {
	var wg sync.WaitGroup
	for _, idx := range groups {
		wg.Go(func() {
			var down error // the source could not be reached
			for _, i := range idx {
				u := &res[i]
				c := units[u.Share.Unit]
				switch {
				case down != nil:
					u.Err = fmt.Errorf("not started: source %s cannot be reached: %w", u.Source, down)
				case ctx.Err() != nil:
					u.Err = fmt.Errorf("not started: %w", ctx.Err())
				default:
					u.Started = true
					u.Stats, u.Err = run(c, u)
					if u.Err != nil && c.cfg.Server.Kind(u.Err) == KindConnection {
						down = u.Err
					}
				}
				if done != nil {
					mu.Lock()
					done(*u)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
}

// merge adds o's counts into s; the first errors and the largest lateness
// are kept.
func (s *RunStats) merge(o RunStats) {
	s.Scanned += o.Scanned
	s.Pages += o.Pages
	s.add(pageResult{closed: o.Closed, paid: o.SkippedPaid, locked: o.SkippedLocked, deadLettered: o.DeadLettered,
		gone: o.SkippedClosed, notDue: o.SkippedNotDue, lockErrors: o.LockErrors, leaseLost: o.LeaseLost,
		contended: o.Contended, conflicts: o.Conflicts, tradePaid: o.TradePaid, tradeErrors: o.TradeErrors,
		maxLate: o.MaxLateness, tradeErr: o.TradeErr, lockErr: o.LockErr})
}
