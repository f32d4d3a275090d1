package sqlexec_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/sqlexec"
)

// GetOne gives a row as a struct or a scalar, nil for no row, and an error
// for a bad query (never nil, nil).
func TestGetOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t).DB
	type row struct {
		N    int    `db:"n"`
		Name string `db:"name"`
	}
	r, err := sqlexec.GetOne[row](ctx, db, "SELECT 7 AS n, 'seven' AS name")
	require.NoError(t, err)
	require.Equal(t, &row{N: 7, Name: "seven"}, r)

	n, err := sqlexec.GetOne[int64](ctx, db, "SELECT ? + 1", 41)
	require.NoError(t, err)
	require.Equal(t, int64(42), *n)

	none, err := sqlexec.GetOne[row](ctx, db, "SELECT 1 AS n, 'x' AS name FROM DUAL WHERE ? = 0", 1)
	require.NoError(t, err)
	require.Nil(t, none, "no row is nil, not an error")

	bad, err := sqlexec.GetOne[row](ctx, db, "SELECT * FROM no_such_table")
	require.Error(t, err)
	require.Nil(t, bad)
}

// SelectIDs renders the id list into the statement, answers an empty
// (non-nil) slice for no ids without asking the database, and passes a
// bad query's error on.
func TestSelectIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t).DB
	const q = `SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) t WHERE n IN (%s) ORDER BY n`
	got, err := sqlexec.SelectIDs[int64](ctx, db, q, []int64{3, 1, 9})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 3}, got)

	none, err := sqlexec.SelectIDs[int64](ctx, db, "SELECT * FROM no_such_table WHERE id IN (%s)", nil)
	require.NoError(t, err, "no ids, no query")
	require.NotNil(t, none)
	require.Empty(t, none)

	_, err = sqlexec.SelectIDs[int64](ctx, db, "SELECT * FROM no_such_table WHERE id IN (%s)", []int64{1})
	require.Error(t, err)
}

// Values repeats the tuple once per row, comma-separated, after the head,
// with each row's arguments in order.
func TestValues(t *testing.T) {
	t.Parallel()
	type kv struct {
		k string
		v int
	}
	q, args := sqlexec.Values("INSERT INTO t (k, v, at) VALUES ", "(?,?,NOW())", []kv{{"a", 1}, {"b", 2}, {"c", 3}},
		func(args []any, r kv) []any { return append(args, r.k, r.v) })
	require.Equal(t, "INSERT INTO t (k, v, at) VALUES (?,?,NOW()),(?,?,NOW()),(?,?,NOW())", q)
	require.Equal(t, []any{"a", 1, "b", 2, "c", 3}, args)
}
