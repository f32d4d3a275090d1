// Package backoff says how long to wait before trying something again: an
// exponential schedule (base × 2^(n-1) after the n-th failure, capped), with
// or without jitter, used both by loops that wait in process (a deadlocked
// transaction, a payment call) and by schedules stored in a row (the next
// attempt of an outbox event, a delayed task or a dead letter), which is why
// the delay is a pure function of the failure count rather than an iterator.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Jitter says how much of a delay is drawn at random.
type Jitter int

const (
	// NoJitter waits the step exactly: for schedules an operator reads and
	// compares (dead letters) and for tests.
	NoJitter Jitter = iota
	// EqualJitter waits between half the step and all of it, so retries of
	// things that failed together spread out but never come sooner than half
	// the step.
	EqualJitter
)

// Exponential is the schedule base × 2^(n-1) after the n-th failure, at
// most Max. The zero value is not usable: Base must be positive.
type Exponential struct {
	// Base is the step after the first failure.
	Base time.Duration
	// Max caps the step; zero means no cap (the step stops doubling before
	// it would overflow).
	Max time.Duration
	// Jitter says how much of each delay is random. Default NoJitter.
	Jitter Jitter
}

// Contention spaces the re-runs of a transaction that lost a deadlock or
// a lock wait: short (the other transaction is about to commit), jittered so
// two losers do not collide again in step. The close's transactions and
// payments both use it.
var Contention = Exponential{Base: 20 * time.Millisecond, Max: time.Second, Jitter: EqualJitter}

// DeadlockRuns bounds the runs of work the server rolled back whole as a
// deadlock's victim (a payment's transaction, a dead-letter retry's
// statement), spaced by Contention: 10-20, 20-40 and 40-80 ms.
const DeadlockRuns = 4

// Validate reports a schedule that cannot work: a base that is not positive,
// or a cap below it.
func (e Exponential) Validate() error {
	switch {
	case e.Base <= 0:
		return fmt.Errorf("backoff base %v must be positive", e.Base)
	case e.Max != 0 && e.Max < e.Base:
		return fmt.Errorf("backoff base %v is above its maximum %v", e.Base, e.Max)
	case e.Jitter != NoJitter && e.Jitter != EqualJitter:
		return fmt.Errorf("backoff jitter %d is unknown", e.Jitter)
	}
	return nil
}

// Step is the delay after the n-th failure without jitter: min(Base ×
// 2^(n-1), Max). n below 1 counts as 1.
func (e Exponential) Step(n int) time.Duration {
	limit := e.Max
	if limit <= 0 {
		limit = time.Duration(1<<63 - 1)
	}
	d := e.Base
	for i := 1; i < n && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// Delay is the wait after the n-th failure: Step(n), with the schedule's
// jitter applied.
func (e Exponential) Delay(n int) time.Duration {
	d := e.Step(n)
	if e.Jitter == EqualJitter && d > 1 {
		half := d / 2
		return half + rand.N(d-half+1)
	}
	return d
}

// Wait sleeps for Delay(n), or until ctx is done. It returns nil after the
// wait, or ctx's error (with its cause, when the context has one of its
// own) if ctx ended first.
func (e Exponential) Wait(ctx context.Context, n int) error {
	t := time.NewTimer(e.Delay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return contextError(ctx)
	}
}

// contextError is ctx.Err(), joined with context.Cause(ctx) when that says
// more, so errors.Is finds both context.Canceled and the cause.
func contextError(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err { //nolint:errorlint // identity: is the cause the context's own error
		return err
	}
	return errors.Join(err, cause)
}

// Retry calls op until it succeeds, says its failure is not worth repeating
// (retry false), or has been called attempts times, waiting Delay(n) after
// the n-th failure. op gets the attempt number, from 1. Retry returns nil on
// success, else op's last error; if ctx ends during a wait, that error
// joined with ctx's.
func Retry(ctx context.Context, e Exponential, attempts int, op func(ctx context.Context, attempt int) (retry bool, err error)) error {
	for n := 1; ; n++ {
		retry, err := op(ctx, n)
		if err == nil {
			return nil
		}
		if !retry || n >= attempts {
			return err
		}
		if werr := e.Wait(ctx, n); werr != nil {
			return errors.Join(err, werr)
		}
	}
}
