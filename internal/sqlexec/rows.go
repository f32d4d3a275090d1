package sqlexec

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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

// SelectIDs reads the rows of query, a statement whose one %s takes the
// literal list of ids (IntList), into a new slice: empty rather than nil,
// and without a round trip, when ids is.
func SelectIDs[T any](ctx context.Context, q sqlx.QueryerContext, query string, ids []int64) ([]T, error) {
	rows := []T{}
	if len(ids) == 0 {
		return rows, nil
	}
	if err := sqlx.SelectContext(ctx, q, &rows, fmt.Sprintf(query, IntList(ids))); err != nil {
		return nil, err
	}
	return rows, nil
}

// Values renders head, an INSERT ending in VALUES, followed by tuple once
// per row, comma-separated, with the arguments add appends for each row in
// order: a multi-row insert in one statement.
func Values[T any](head, tuple string, rows []T, add func(args []any, row T) []any) (string, []any) {
	var b strings.Builder
	b.Grow(len(head) + len(rows)*(len(tuple)+1))
	b.WriteString(head)
	args := make([]any, 0, strings.Count(tuple, "?")*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tuple)
		args = add(args, r)
	}
	return b.String(), args
}
