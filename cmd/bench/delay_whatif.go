package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// droppableIndexes are the secondary indexes of job_delay_task that
// -drop-task-index may drop: the ones a status change rewrites besides
// idx_status_next_attempt, which the claim path itself needs (the timer's
// refill and the sweep read it).
var droppableIndexes = []string{"idx_status_updated", "idx_status_published"}

// parseDroppableIndexes checks a comma-separated list of droppableIndexes.
func parseDroppableIndexes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("is empty: want one or more of %s", strings.Join(droppableIndexes, ", "))
	}
	var out []string
	for i, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		if !slices.Contains(droppableIndexes, name) {
			return nil, fmt.Errorf("item %d, %q, is not one of %s", i+1, name, strings.Join(droppableIndexes, ", "))
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("item %d, %q, repeats an earlier item", i+1, name)
		}
		out = append(out, name)
	}
	return out, nil
}

// dropTaskIndexes drops the indexes of -drop-task-index from the run's
// freshly migrated job_delay_task and says so on w; none is nothing to do.
func dropTaskIndexes(ctx context.Context, db *sqlx.DB, names []string, w io.Writer) error {
	if len(names) == 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE job_delay_task DROP INDEX "+strings.Join(names, ", DROP INDEX ")); err != nil {
		return fmt.Errorf("-drop-task-index: %w", err)
	}
	fmt.Fprintf(w, "what-if: job_delay_task without %s (statements naming them fail in this run)\n", strings.Join(names, ", "))
	return nil
}
