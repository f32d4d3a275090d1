package lifecycle

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/orderjob/executor/internal/unitrun"
)

// Sweep runs a lifecycle job over many units, each an order table of one
// source database with the Jobs for it, in one run: the jobs' work when
// orders are split over databases and tables (order.sources,
// docs/sharded-orders.md), shared out as the close's sweep shares it.
// Safe for concurrent use.
type Sweep struct {
	units []*Jobs
	names []unitrun.Unit // the units' names, in order
}

// NewSweep returns the sweep over units, in the order given (the order
// shard.Assign hands them out in); each (source, table) at most once.
func NewSweep(units ...*Jobs) (*Sweep, error) {
	names, err := unitrun.Names(units)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: %w", err)
	}
	return &Sweep{units: units, names: names}, nil
}

// Units are the sweep's Jobs, in order.
func (s *Sweep) Units() []*Jobs { return s.units }

// UnitRun is one unit's share of a sweep and what it did.
type UnitRun = unitrun.Run[Stats]

// SweepOptions are a sweep's parameters: Options, whose ShardIndex and
// ShardTotal are this executor among the broadcast's (shard.Assign turns
// them into each unit's share), whose MaxOrders is split evenly over the
// executor's units, and whose Progress is not used.
type SweepOptions struct {
	Options
	// UnitProgress, if set, is called after each page of a unit; UnitDone
	// after each unit's run. Calls never overlap, whatever goroutine makes
	// them.
	UnitProgress func(u UnitRun, p Page)
	UnitDone     func(u UnitRun)
}

// SweepResult is what a sweep did: every unit's run, and their sum
// (Total; its Elapsed is the sweep's).
type SweepResult = unitrun.Result[Stats]

// Run runs job (JobAutoConfirm or JobFulfillmentTimeout) over this
// executor's share of every unit (unitrun.Sweep): one goroutine per source
// database, its units one after the other. A unit's error fails that unit
// and no other; one its Jobs' Unreachable says is about the database also
// fails the source's units not yet started. MaxOrders is split evenly
// over the executor's units. Run returns when every goroutine has.
func (s *Sweep) Run(ctx context.Context, job string, opt SweepOptions) (SweepResult, error) {
	start := time.Now()
	do, verb := (*Jobs).AutoConfirm, "completed"
	switch job {
	case JobAutoConfirm:
	case JobFulfillmentTimeout:
		do, verb = (*Jobs).FlagOverdue, "flagged"
	default:
		return SweepResult{}, fmt.Errorf("lifecycle: no job %q", job)
	}
	sw := unitrun.New[Stats](s.names, opt.ShardIndex, opt.ShardTotal)
	unitOpt := opt.Options
	if opt.MaxOrders > 0 && len(sw.Runs) > 0 {
		unitOpt.MaxOrders = int(math.Ceil(float64(opt.MaxOrders) / float64(len(sw.Runs))))
	}
	run := func(ctx context.Context, u *UnitRun) (Stats, error) {
		o := unitOpt
		o.ShardIndex, o.ShardTotal = u.Share.RowIndex, u.Share.RowTotal
		if opt.UnitProgress != nil {
			o.Progress = func(p Page) { sw.Serial(func() { opt.UnitProgress(*u, p) }) }
		}
		return do(s.units[u.Share.Unit], ctx, o)
	}
	down := func(u *UnitRun) bool {
		unreachable := s.units[u.Share.Unit].cfg.Unreachable
		return unreachable != nil && unreachable(u.Err)
	}
	sw.Do(ctx, run, down, opt.UnitDone)
	res := SweepResult{Units: sw.Runs}
	res.Total.DryRun, res.Total.verb = opt.DryRun, verb
	for _, u := range res.Units {
		if res.Total.Now.IsZero() {
			res.Total.Now, res.Total.Cutoff = u.Stats.Now, u.Stats.Cutoff
		}
		res.Total.Days = max(res.Total.Days, u.Stats.Days)
		res.Total.Scanned += u.Stats.Scanned
		res.Total.Changed += u.Stats.Changed
		res.Total.Skipped += u.Stats.Skipped
		res.Total.Pages += u.Stats.Pages
	}
	res.Total.Elapsed = time.Since(start)
	return res, nil
}
