package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This file runs the SQL that writes the close-run records
// (order_close_run; the statements are in package closesql): the insert
// every Run ends with and the retention purge (package inspect reads
// them). None of them touches another table or takes a lock beyond the
// rows it writes.

func (store) insertCloseRun(ctx context.Context, e sqlx.ExtContext, r RunRecord) error {
	if _, err := sqlx.NamedExecContext(ctx, e, closesql.InsertCloseRun, r); err != nil {
		return fmt.Errorf("record close run: %w", err)
	}
	return nil
}

func (store) insertInterruptedCloseRun(ctx context.Context, e sqlx.ExtContext, r RunRecord) (bool, error) {
	res, err := sqlx.NamedExecContext(ctx, e, closesql.InsertInterruptedCloseRun, r)
	if err != nil {
		return false, fmt.Errorf("record interrupted close run of log %d: %w", r.LogID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record interrupted close run of log %d: %w", r.LogID, err)
	}
	return n > 0, nil
}

func (store) purgeCloseRuns(ctx context.Context, e sqlx.ExtContext, retention time.Duration, limit int) error {
	var ids []int64
	if err := sqlexec.SelectNamed(ctx, e, &ids, closesql.ExpiredCloseRuns, map[string]any{"retention_us": retention.Microseconds(), "limit": limit}); err != nil {
		return fmt.Errorf("find expired close runs: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := e.ExecContext(ctx, fmt.Sprintf(closesql.DeleteCloseRuns, sqlexec.IntList(ids))); err != nil {
		return fmt.Errorf("delete %d expired close runs: %w", len(ids), err)
	}
	return nil
}
