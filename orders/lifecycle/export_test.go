package lifecycle

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// The scans' statements, exposed to the EXPLAIN test.
var (
	ScanShippedSQL = render(defaultTable).scanShipped
	ScanOverdueSQL = render(defaultTable).scanOverdue
)

// FlagOverdueIDs runs the fulfillment job's page statement on ids.
func FlagOverdueIDs(ctx context.Context, db *sqlx.DB, ids []int64, days int, cutoff time.Time) (int64, error) {
	return newStore(defaultTable).flagOverdue(ctx, db, ids, days, cutoff)
}

// CompleteOrderIDs runs the auto-confirm job's page statement on ids.
func CompleteOrderIDs(ctx context.Context, db *sqlx.DB, ids []int64, cutoff time.Time) (int64, error) {
	return newStore(defaultTable).completeOrders(ctx, db, ids, cutoff)
}
