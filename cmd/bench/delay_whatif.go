package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jmoiron/sqlx"
)

// addOldTaskIndexes, for -old-task-indexes, adds back to the run's freshly
// migrated job_delay_task the two status-led indexes migration 0091
// dropped, as they were, so a run shows what their upkeep costs (a claim
// and a DONE change status and updated_at, and so the row's entry in
// each). Nothing reads them; off is nothing to do.
func addOldTaskIndexes(ctx context.Context, db *sqlx.DB, on bool, w io.Writer) error {
	if !on {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE job_delay_task
		ADD INDEX idx_status_updated (status, updated_at), ADD INDEX idx_status_published (status, published_at, updated_at)`); err != nil {
		return fmt.Errorf("-old-task-indexes: %w", err)
	}
	fmt.Fprintln(w, "what-if: job_delay_task with idx_status_updated and idx_status_published added back (the indexes before migration 0091)")
	return nil
}
