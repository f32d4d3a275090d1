package orders

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the payment step (tradestep.go).

// readOrders re-reads the orders of a page before their trades are closed
// at the payment side (closesql.Statements.ReadOrders). One row per id that exists.
func (s store) readOrders(ctx context.Context, q sqlx.QueryerContext, ids []int64) ([]orderRow, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(s.sql().ReadOrders, sqlexec.IntList(ids))); err != nil {
		return nil, fmt.Errorf("read %d orders: %w", len(ids), err)
	}
	return rows, nil
}
