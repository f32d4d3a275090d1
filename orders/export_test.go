package orders

import (
	"context"
	"time"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// ShiftClock makes c read the database's clock d later, so orders placed
// now are due for it without waiting for their timeout.
func ShiftClock(c *Closer, d time.Duration) *Closer {
	c.shift = d
	return c
}

// ScanPageQuery is the scan statement of one page, bound, for the EXPLAIN
// test.
func ScanPageQuery(after time.Time, afterID int64, now time.Time, shardTotal, shardIndex, limit int) (string, []any, error) {
	return sqlexec.Named(closesql.Default.ScanPage, scanParams{AfterTime: after, AfterID: afterID, Now: now,
		ShardTotal: shardTotal, ShardIndex: shardIndex, Limit: limit})
}

// SavedCursor is where the next capped run of shard 0 of 1 of c's table
// resumes, as a run reads it: the time and id of the last order handled.
func SavedCursor(ctx context.Context, c *Closer) (time.Time, int64, error) {
	cur, _, err := c.store.closeCursor(ctx, c.db, c.Table(), 0, 1)
	return cur.CreateTime, cur.ID, err
}
