package sqlexec

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
)

// GetOne reads the one row query returns into a new T: nil and no error
// when there is none, the caller's "not found" being a value rather than
// sql.ErrNoRows to test for. T is a struct with db tags or, for a
// one-column query, a scalar.
func GetOne[T any](ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (*T, error) {
	var v T
	if err := sqlx.GetContext(ctx, q, &v, query, args...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, err
	}
	return &v, nil
}
