package sqlexec_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/sqlexec"
)

func TestIntList(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", sqlexec.IntList(nil))
	require.Equal(t, "1,-2,30", sqlexec.IntList([]int64{1, -2, 30}))
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", sqlexec.Truncate("abc", 5))
	require.Equal(t, "ab...", sqlexec.Truncate("abcdefgh", 5))
	require.Equal(t, "订单...", sqlexec.Truncate("订单关闭失败原因", 5))
	require.Equal(t, "status 500: \uFFFD O-1", sqlexec.Truncate("status 500: \xb6\xa9\xb5\xa5 O-1", 50))
	require.Equal(t, "\uFFFDa...", sqlexec.Truncate("\xffabcdef", 5))
}

// A server that is not a Galera node (the shared one) says so, and a
// transaction of InCausalTx there is a plain one, and so is a CausalRead.
func TestGaleraOnAPlainServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	galera, err := sqlexec.Galera(ctx, db.DB)
	require.NoError(t, err)
	require.False(t, galera)
	var one int
	require.NoError(t, sqlexec.InCausalTx(ctx, db.DB, galera, func(tx *sqlx.Tx) error {
		return tx.GetContext(ctx, &one, "SELECT 1")
	}))
	require.Equal(t, 1, one)
	require.NoError(t, sqlexec.CausalRead(ctx, db.DB, func(q sqlx.QueryerContext) error {
		return sqlx.GetContext(ctx, q, &one, "SELECT 2")
	}))
	require.Equal(t, 2, one)
}

func TestQtyCase(t *testing.T) {
	t.Parallel()
	require.Equal(t, "CASE WHEN sku_id IN (3) THEN 1 WHEN sku_id IN (1,5) THEN 2 WHEN sku_id IN (9) THEN 7 END",
		sqlexec.QtyCase("sku_id", map[int64]int64{9: 7, 5: 2, 3: 1, 1: 2}))
	require.Equal(t, "CASE END", sqlexec.QtyCase("k", nil))
}
