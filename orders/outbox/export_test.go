package outbox

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// MarkDelivered runs the relay's fenced "done" write, so a test can show
// a dead relay's claim marks nothing.
func MarkDelivered(ctx context.Context, db *sqlx.DB, id, claimID int64) (bool, error) {
	return store{}.markDelivered(ctx, db, id, claimID)
}
