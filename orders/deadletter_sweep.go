package orders

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/unitrun"
)

// UnitRetry is one unit's share of a dead-letter retry sweep and what it
// did.
type UnitRetry = unitrun.Run[RetryStats]

// RetrySweepResult is what a dead-letter retry sweep did: every unit's
// retry, and their sum.
type RetrySweepResult struct {
	Units []UnitRetry // the shares this executor took, in unit order
	Total RetryStats  // the units' stats added up; Elapsed is the sweep's
}

// Failed are the units whose retry an error stopped.
func (r RetrySweepResult) Failed() []UnitRetry { return unitrun.Failed(r.Units) }

// Err is the first unit's error joined with a count of the others, nil
// when every unit ran to its end.
func (r RetrySweepResult) Err() error { return unitrun.Err(r.Units) }

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
	sw := unitrun.New[RetryStats](s.unitList(), opt.ShardIndex, opt.ShardTotal)
	tableless := s.tablelessTakers()
	unitOpt := opt
	unitOpt.MaxLetters = perUnit(opt.MaxLetters, len(sw.Runs))
	run := func(ctx context.Context, u *UnitRetry) (RetryStats, error) {
		ro := unitOpt
		ro.ShardIndex, ro.ShardTotal = u.Share.RowIndex, u.Share.RowTotal
		c := s.units[u.Share.Unit]
		return c.retryDeadLetters(ctx, ro, tableless[c])
	}
	sw.Do(ctx, run, sourceDown[RetryStats](s), done)
	res := RetrySweepResult{Units: sw.Runs, Total: sumOf(sw.Runs, (*RetryStats).merge)}
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
