package sqlexec

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// Named binds query's :name parameters from arg (a params struct with db
// tags, or a map[string]any) and expands the slices among them, so a
// statement's parameters are named where they are used (IN (:ids) as much
// as status = :status) and no comment has to list them in order. A name
// may appear more than once. A literal colon in the SQL is written ::.
func Named(query string, arg any) (string, []any, error) {
	q, args, err := sqlx.Named(query, arg)
	if err != nil {
		return "", nil, err
	}
	return sqlx.In(q, args...)
}

// ExecNamed runs a named statement (see Named).
func ExecNamed(ctx context.Context, e sqlx.ExecerContext, query string, arg any) (sql.Result, error) {
	q, args, err := Named(query, arg)
	if err != nil {
		return nil, err
	}
	return e.ExecContext(ctx, q, args...)
}

// SelectNamed runs a named query (see Named) into the slice dest.
func SelectNamed(ctx context.Context, q sqlx.QueryerContext, dest any, query string, arg any) error {
	query, args, err := Named(query, arg)
	if err != nil {
		return err
	}
	return sqlx.SelectContext(ctx, q, dest, query, args...)
}

// GetNamed runs a named query (see Named) of one row into dest.
func GetNamed(ctx context.Context, q sqlx.QueryerContext, dest any, query string, arg any) error {
	query, args, err := Named(query, arg)
	if err != nil {
		return err
	}
	return sqlx.GetContext(ctx, q, dest, query, args...)
}
