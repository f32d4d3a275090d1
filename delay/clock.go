package delay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// clock estimates the database's clock (UTC_TIMESTAMP) from the local one.
// Due is judged by the database, the one referee between executors whose
// clocks drift apart; reading it on every pop would cost a round trip, so
// the offset is measured (midpoint of the round trip) and refreshed
// periodically. Its error is about a millisecond plus half the round trip;
// the claim's own due check in SQL is what makes an early pop harmless.
type clock struct {
	db     *sqlx.DB
	store  store
	maxAge time.Duration
	offset atomic.Int64 // database minus local, ns
	syncAt atomic.Int64 // local UnixNano of the last sync, 0 never
	syncMu sync.Mutex
}

func newClock(db *sqlx.DB, maxAge time.Duration) *clock {
	return &clock{db: db, maxAge: maxAge}
}

// Now is the estimated database time, in UTC, with millisecond precision
// (the table's).
func (c *clock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC().Truncate(time.Millisecond)
}

// NowSynced is Now after a sync if the last one is older than maxAge.
func (c *clock) NowSynced(ctx context.Context) (time.Time, error) {
	last := c.syncAt.Load()
	if last == 0 || time.Since(time.Unix(0, last)) > c.maxAge {
		if err := c.Sync(ctx); err != nil {
			return time.Time{}, err
		}
	}
	return c.Now(), nil
}

// Sync measures the offset.
func (c *clock) Sync(ctx context.Context) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	t0 := time.Now()
	db, err := c.store.dbNow(ctx, c.db)
	if err != nil {
		return err
	}
	t1 := time.Now()
	mid := t0.Add(t1.Sub(t0) / 2)
	// UTC_TIMESTAMP(3) truncates to the millisecond: add half of one.
	c.offset.Store(int64(db.Add(500 * time.Microsecond).Sub(mid)))
	c.syncAt.Store(t1.UnixNano())
	return nil
}
