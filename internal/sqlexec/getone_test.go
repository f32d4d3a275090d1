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
