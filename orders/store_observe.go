package orders

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This file runs the SQL behind the close path's gauges (overdue orders,
// dead letters; package closesql holds it), which a metrics sampler reads
// every few seconds. Both statements are plain consistent reads with a
// bounded cost.

// overdueCap bounds the unpaid orders Overdue examines, and so its count.
const overdueCap = 10000

// overdue runs closesql.Statements.Overdue: how many unpaid orders past
// their deadline the sweep should have closed, up to limit, and the
// earliest deadline among them (in the frame of the shop's time columns:
// see runClock for now and shop).
func (s store) overdue(ctx context.Context, q sqlx.QueryerContext, now, shop time.Time, limit int) (int, sql.NullTime, error) {
	var r struct {
		N      int          `db:"n"`
		Oldest sql.NullTime `db:"oldest"`
	}
	if err := sqlexec.GetNamed(ctx, q, &r, s.sql().Overdue, map[string]any{"now": now, "cap": limit,
		closesql.NowEpoch: s.sql().Schema.Orders.TimeUnit.Of(shop)}); err != nil {
		return 0, sql.NullTime{}, fmt.Errorf("count overdue orders: %w", err)
	}
	return r.N, r.Oldest, nil
}

// Overdue reports the unpaid orders whose deadline has passed by the database
// clock and that the sweep would close (their close is not
// held back by a dead letter): how many, up to overdueCap, and how long ago
// the earliest deadline among them passed (0 when there is none). It reads
// two statements without locks, for a metrics gauge.
func (c *Closer) Overdue(ctx context.Context) (count int, oldest time.Duration, err error) {
	clock, _, err := c.readClock(ctx)
	if err != nil {
		return 0, 0, err
	}
	return c.store.overdueAt(ctx, c.db, clock)
}

// overdueAt is overdue up to overdueCap with the age of the earliest
// deadline at the clock's time (0 when there is none).
func (s store) overdueAt(ctx context.Context, q sqlx.QueryerContext, clock runClock) (int, time.Duration, error) {
	n, first, err := s.overdue(ctx, q, clock.now, clock.shop, overdueCap)
	if err != nil || n == 0 || !first.Valid {
		return n, 0, err
	}
	return n, max(clock.shop.Sub(first.Time), 0), nil
}

// DeadLetterTally is the number of dead letters of one stage in one status.
type DeadLetterTally struct {
	Stage  string `db:"stage"`
	Status string `db:"status"`
	N      int    `db:"n"`
}

func (store) deadLetterTallies(ctx context.Context, q sqlx.QueryerContext) ([]DeadLetterTally, error) {
	var rows []DeadLetterTally
	if err := sqlx.SelectContext(ctx, q, &rows, closesql.DeadLetterTallies); err != nil {
		return nil, fmt.Errorf("count dead letters: %w", err)
	}
	return rows, nil
}

// DeadLetterTallies counts the dead letters waiting for a retry or parked for
// a person, by stage and status (only the combinations that have any), for a
// metrics gauge.
func (c *Closer) DeadLetterTallies(ctx context.Context) ([]DeadLetterTally, error) {
	return c.store.deadLetterTallies(ctx, c.db)
}
