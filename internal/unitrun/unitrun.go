// Package unitrun runs one executor's share of many units, each an order
// table of one source database, in one run: the loop the close's sweep
// (orders.Sweep) and the lifecycle jobs' (lifecycle.Sweep) share
// (docs/sharded-orders.md). It hands the units out with shard.Assign, runs
// each source's on a goroutine of its own, one unit after the other, and
// fails a source's units not yet started once one of them says the
// database cannot be reached. What a unit's run does is the caller's.
package unitrun

import (
	"context"
	"fmt"
	"sync"

	"github.com/orderjob/executor/internal/shard"
)

// Unit names a unit: an order table of one source.
type Unit struct {
	Source, Table string
}

// Run is one unit's share of a run and what it did (S: the caller's
// stats).
type Run[S any] struct {
	Source, Table string
	// Share is the unit's rows this executor took: all of them, or the
	// rows of one row shard (shard.Assign).
	Share shard.Share
	Stats S
	// Err is what stopped the unit's run; for a unit never started (its
	// source unreachable, the run cancelled) it says why.
	Err error
	// Started is false for a unit whose run was not started.
	Started bool
}

// Name is the unit as the run log and messages write it: source/table.
func (u Run[S]) Name() string { return u.Source + "/" + u.Table }

// Sweep is one executor's share of the units of one run. Its methods
// other than Serial are not safe for concurrent use.
type Sweep[S any] struct {
	// Runs are the shares this executor took, in unit order; Do fills in
	// their Stats, Err and Started.
	Runs []Run[S]
	// Sources counts the distinct sources of Runs.
	Sources int
	mu      sync.Mutex // serializes the callers' callbacks
}

// New returns executor index's share of units among total executors
// (shard.Assign: whole units in turn, the rest split by rows), not run
// yet.
func New[S any](units []Unit, index, total int) *Sweep[S] {
	shares := shard.Assign(len(units), index, total)
	s := &Sweep[S]{Runs: make([]Run[S], len(shares))}
	seen := map[string]bool{}
	for i, sh := range shares {
		u := units[sh.Unit]
		s.Runs[i] = Run[S]{Source: u.Source, Table: u.Table, Share: sh}
		if !seen[u.Source] {
			seen[u.Source] = true
			s.Sources++
		}
	}
	return s
}

// Serial calls f so that it never overlaps another Serial call or a done
// callback of Do, whatever goroutine makes it: the callers' progress
// callbacks go through it.
func (s *Sweep[S]) Serial(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Do runs every share: one goroutine per source, each running its units
// one after the other with run, so sources work in parallel. A unit's
// error fails that unit and no other; an error down says is about the
// database being unreachable also fails the source's units not yet
// started, without trying each. done, if set, is called after each unit
// (run or not), through Serial. Do returns when every goroutine has.
func (s *Sweep[S]) Do(ctx context.Context, run func(ctx context.Context, u *Run[S]) (S, error),
	down func(u *Run[S]) bool, done func(Run[S])) {
	bySource := map[string][]int{} // source → indexes into Runs, in order
	var sources []string
	for i, u := range s.Runs {
		if _, ok := bySource[u.Source]; !ok {
			sources = append(sources, u.Source)
		}
		bySource[u.Source] = append(bySource[u.Source], i)
	}
	var wg sync.WaitGroup
	for _, src := range sources {
		wg.Go(func() { s.runSource(ctx, bySource[src], run, down, done) })
	}
	wg.Wait()
}

// runSource runs the units at idx (of one source) in turn.
func (s *Sweep[S]) runSource(ctx context.Context, idx []int, run func(context.Context, *Run[S]) (S, error),
	down func(*Run[S]) bool, done func(Run[S])) {
	var gone error // the source could not be reached
	for _, i := range idx {
		u := &s.Runs[i]
		switch {
		case gone != nil:
			u.Err = fmt.Errorf("not started: source %s cannot be reached: %w", u.Source, gone)
		case ctx.Err() != nil:
			u.Err = fmt.Errorf("not started: %w", ctx.Err())
		default:
			u.Started = true
			u.Stats, u.Err = run(ctx, u)
			if u.Err != nil && down != nil && down(u) {
				gone = u.Err
			}
		}
		if done != nil {
			s.Serial(func() { done(*u) })
		}
	}
}

// Failed are the runs an error stopped.
func Failed[S any](runs []Run[S]) []Run[S] {
	var out []Run[S]
	for _, u := range runs {
		if u.Err != nil {
			out = append(out, u)
		}
	}
	return out
}

// Err is the first failed run's error joined with a count of the others,
// nil when every unit ran to its end.
func Err[S any](runs []Run[S]) error {
	f := Failed(runs)
	switch len(f) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s: %w", f[0].Name(), f[0].Err)
	}
	return fmt.Errorf("%d of %d units failed, first %s: %w", len(f), len(runs), f[0].Name(), f[0].Err)
}
