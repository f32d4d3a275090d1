package orders

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/unitrun"
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

// UnitRun is one unit's share of a sweep and what it did: its Stats,
// what stopped it (Err), whether it was Started (unitrun.Run).
type UnitRun = unitrun.Run[RunStats]

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

// SweepResult is what a sweep did: every unit's run, and their sum.
type SweepResult struct {
	Units []UnitRun // the shares this executor took, in unit order
	Total RunStats  // the units' stats added up; Elapsed is the sweep's
}

// Failed are the units whose run an error stopped.
func (r SweepResult) Failed() []UnitRun { return unitrun.Failed(r.Units) }

// Err is the first unit's error joined with a count of the others, nil
// when every unit ran to its end.
func (r SweepResult) Err() error { return unitrun.Err(r.Units) }

// Run runs this executor's share of every unit (unitrun.Sweep): one
// goroutine per source database, each running its units one after the
// other, so sources close in parallel, each within its own pool. A unit's
// error fails that unit and no other; an error saying its database cannot
// be reached (dbserver.KindConnection) also fails the source's units not yet
// started, without trying each. MaxOrders is split evenly over the
// executor's units, MaxPerSecond over its sources. Run returns when every
// goroutine has.
func (s *Sweep) Run(ctx context.Context, opt SweepOptions) SweepResult {
	start := time.Now()
	sw := unitrun.New[RunStats](s.unitList(), opt.ShardIndex, opt.ShardTotal)
	unitOpt := opt.RunOptions
	unitOpt.MaxOrders = perUnit(opt.MaxOrders, len(sw.Runs))
	if opt.MaxPerSecond > 0 && sw.Sources > 0 {
		unitOpt.MaxPerSecond = opt.MaxPerSecond / float64(sw.Sources)
	}
	run := func(ctx context.Context, u *UnitRun) (RunStats, error) {
		ro := unitOpt
		ro.ShardIndex, ro.ShardTotal = u.Share.RowIndex, u.Share.RowTotal
		if opt.UnitProgress != nil {
			ro.Progress = func(p PageStats) { sw.Serial(func() { opt.UnitProgress(*u, p) }) }
		}
		return s.units[u.Share.Unit].Run(ctx, ro)
	}
	sw.Do(ctx, run, sourceDown[RunStats](s), opt.UnitDone)
	res := SweepResult{Units: sw.Runs, Total: sumOf(sw.Runs, (*RunStats).merge)}
	res.Total.DryRun = opt.DryRun
	res.Total.Elapsed = time.Since(start)
	return res
}

// perUnit is a run's cap split evenly over its n units, rounded up, so the
// units together reach it; 0 (no cap) stays 0.
func perUnit(limit, n int) int {
	if limit <= 0 || n == 0 {
		return limit
	}
	return int(math.Ceil(float64(limit) / float64(n)))
}

// sumOf is the units' stats added up with merge: a sweep's Total.
func sumOf[S any](runs []unitrun.Run[S], merge func(*S, S)) S {
	var total S
	for _, u := range runs {
		merge(&total, u.Stats)
	}
	return total
}

// unitList is the sweep's units as unitrun takes them, in order.
func (s *Sweep) unitList() []unitrun.Unit {
	units := make([]unitrun.Unit, len(s.units))
	for i, c := range s.units {
		units[i] = unitrun.Unit{Source: c.Source(), Table: c.Table()}
	}
	return units
}

// sourceDown says whether the error that stopped a unit means its database
// cannot be reached (dbserver.KindConnection): the source's other units are then
// failed without trying each.
func sourceDown[S any](s *Sweep) func(u *unitrun.Run[S]) bool {
	return func(u *unitrun.Run[S]) bool {
		return s.units[u.Share.Unit].cfg.Server.Kind(u.Err) == dbserver.KindConnection
	}
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
