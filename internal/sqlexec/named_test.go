package sqlexec_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/sqlexec"
)

func TestNamed(t *testing.T) {
	t.Parallel()
	type params struct {
		IDs    []int64 `db:"ids"`
		Status int     `db:"status"`
	}
	q, args, err := sqlexec.Named(`UPDATE t SET s = :status WHERE id IN (:ids) AND s <> :status AND note = 'a::b'`,
		params{IDs: []int64{3, 4}, Status: 2})
	require.NoError(t, err)
	require.Equal(t, `UPDATE t SET s = ? WHERE id IN (?, ?) AND s <> ? AND note = 'a:b'`, q)
	require.Equal(t, []any{2, int64(3), int64(4), 2}, args)

	q, args, err = sqlexec.Named(`SELECT 1 FROM t WHERE a = :a LIMIT :n`, map[string]any{"a": "x", "n": 5})
	require.NoError(t, err)
	require.Equal(t, `SELECT 1 FROM t WHERE a = ? LIMIT ?`, q)
	require.Equal(t, []any{"x", 5}, args)

	_, _, err = sqlexec.Named(`SELECT :missing`, map[string]any{})
	require.Error(t, err)
}
