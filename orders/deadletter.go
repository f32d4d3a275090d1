package orders

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/sqlexec"
)

// DeadLetterBackoff says when a failed close is tried again. Zero fields take
// the defaults given.
type DeadLetterBackoff struct {
	// Base is the wait after the first failure; it doubles with each further
	// failure. Default DefaultDeadLetterBaseBackoff (1m).
	Base time.Duration
	// Max caps the wait. Default DefaultDeadLetterMaxBackoff (6h).
	Max time.Duration
	// ParkAfter parks a dead letter once it has failed this many times, so
	// the sweep stops retrying it until an operator acts. Default 0: never.
	ParkAfter int
}

// Defaults of DeadLetterBackoff, and of the executor's order.deadLetter
// keys (config takes them from here).
const (
	DefaultDeadLetterBaseBackoff = time.Minute
	DefaultDeadLetterMaxBackoff  = 6 * time.Hour
)

func (b DeadLetterBackoff) withDefaults() (DeadLetterBackoff, error) {
	b.Base = cmp.Or(b.Base, DefaultDeadLetterBaseBackoff)
	b.Max = cmp.Or(b.Max, DefaultDeadLetterMaxBackoff)
	if err := b.schedule().Validate(); err != nil {
		return b, fmt.Errorf("orders: dead letters: %w", err)
	}
	if b.ParkAfter < 0 {
		return b, fmt.Errorf("orders: dead-letter parkAfter %d is negative", b.ParkAfter)
	}
	return b, nil
}

// schedule is the wait before the retry after the n-th failed close. It has
// no jitter: operators read next_retry_at and compare it with the settings.
// closesql.UpsertDeadLetter evaluates the same schedule inside its statement,
// where the attempt count is known.
func (b DeadLetterBackoff) schedule() backoff.Exponential {
	return backoff.Exponential{Base: b.Base, Max: b.Max}
}

// maxErrorLen is order_dead_letter.last_error's width.
const maxErrorLen = 2000

// deadLetter records cause for orderNo in its own statement, run again
// when the server rolled it back as a deadlock's victim (rerunDB): the
// upsert locks the letter's uk_order_stage entry and row, then moves its
// index entries, as other executors' closes and retry jobs write letters
// of the same table. now is the run's database time, so next_retry_at is
// on the same clock the scan compares it with.
func (c *Closer) deadLetter(ctx context.Context, orderNo string, now time.Time, cause error) error {
	return c.store.upsertDeadLetter(ctx, rerunDB{c.db, c.cfg.Server}, c.Table(), orderNo, sqlexec.Truncate(cause.Error(), maxErrorLen), now, c.cfg.DeadLetterBackoff)
}
