package orders

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/orderjob/executor/internal/shard"
)

// UnitRetry is one unit's share of a dead-letter retry sweep and what it
// did.
type UnitRetry = UnitResult[RetryStats]

// RetrySweepResult is what a dead-letter retry sweep did.
type RetrySweepResult = UnitsResult[RetryStats]

// RetryDeadLetters retries the due close dead letters of every unit, the
// job of deadLetterRetryJob over order.sources: each source database keeps
// its own order_dead_letter, and a letter names its order table
// (order_table), so each unit replays its table's letters with its own
// Closer (Closer.RetryDeadLetters). The units are shared among broadcast
// executors as the close sweep shares them (shard.Assign: whole units in
// turn, the rest by a hash of the letter id), the sources run in parallel,
// and a source that cannot be reached fails its own units only (Run).
// The letters that name no table (written before migration 0138) are
// taken with the first unit of their database, which looks for each order
// in the database's tables in turn. MaxLetters is split evenly over the
// executor's units. done, if set, is called after each unit, never two at
// once.
func (s *Sweep) RetryDeadLetters(ctx context.Context, opt RetryOptions, done func(UnitRetry)) RetrySweepResult {
	start := time.Now()
	shares := shard.Assign(len(s.units), opt.ShardIndex, opt.ShardTotal)
	units, groups := unitsBySource[RetryStats](s.units, shares)
	res := RetrySweepResult{Units: units}
	tableless := s.tablelessTakers()
	unitOpt := opt
	if opt.MaxLetters > 0 && len(shares) > 0 {
		unitOpt.MaxLetters = int(math.Ceil(float64(opt.MaxLetters) / float64(len(shares))))
	}
	var mu sync.Mutex // serializes done
	runBySource(ctx, s.units, groups, res.Units, &mu, func(c *Closer, u *UnitRetry) (RetryStats, error) {
		ro := unitOpt
		ro.ShardIndex, ro.ShardTotal = u.Share.RowIndex, u.Share.RowTotal
		return c.retryDeadLetters(ctx, ro, tableless[c])
	}, done)
	for _, u := range res.Units {
		res.Total.merge(u.Stats)
	}
	res.Total.DryRun = opt.DryRun
	res.Total.Elapsed = time.Since(start)
	return res
}

// tablelessTakers maps the first unit of each source database to all the
// units of that database, in order: the Closers that look for the order
// of a letter naming no table.
func (s *Sweep) tablelessTakers() map[*Closer][]*Closer {
	first := map[sourceKey]*Closer{}
	out := map[*Closer][]*Closer{}
	for _, c := range s.units {
		k := sourceKey{c.Source(), c.db}
		if _, ok := first[k]; !ok {
			first[k] = c
		}
		out[first[k]] = append(out[first[k]], c)
	}
	return out
}

// merge adds o's counts into s; the first skip error is kept.
func (s *RetryStats) merge(o RetryStats) {
	s.Found += o.Found
	s.Closed += o.Closed
	s.AlreadyDone += o.AlreadyDone
	s.Failed += o.Failed
	s.Parked += o.Parked
	s.Skipped += o.Skipped
	s.SkipErrors += o.SkipErrors
	s.Pages += o.Pages
	if s.SkipErr == nil {
		s.SkipErr = o.SkipErr
	}
}
