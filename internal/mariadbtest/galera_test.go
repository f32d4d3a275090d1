package mariadbtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/sqlexec"
)

// A three-node cluster: a row written on one node is read on another (with
// wsrep_sync_wait), AUTO_INCREMENT ids interleave by the node count, a row
// locked FOR UPDATE on one node does not stop an UPDATE on another, and the
// first transaction then fails with 1213 at its next statement; a killed
// node rejoins.
func TestGaleraCluster(t *testing.T) {
	ctx := context.Background()
	c := mariadbtest.StartGalera(t, 3)
	dbs, _ := c.NewDB(t, "galera_test")
	n, err := c.Size(2)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	_, err = dbs[0].ExecContext(ctx, "INSERT INTO inventory (sku_id, available, locked) VALUES (1, 10, 0)")
	require.NoError(t, err)
	conn, err := dbs[2].Connx(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1")
	require.NoError(t, err)
	var avail int
	require.NoError(t, conn.GetContext(ctx, &avail, "SELECT available FROM inventory WHERE sku_id = 1"))
	require.Equal(t, 10, avail, "read through another node after a causal wait")

	var incr int
	require.NoError(t, dbs[0].GetContext(ctx, &incr, "SELECT @@auto_increment_increment"))
	require.Equal(t, 3, incr, "Galera spaces AUTO_INCREMENT ids by the node count")

	tx, err := dbs[0].BeginTxx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, tx.GetContext(ctx, &avail, "SELECT available FROM inventory WHERE sku_id = 1 FOR UPDATE"))
	_, err = dbs[1].ExecContext(ctx, "UPDATE inventory SET available = available - 1 WHERE sku_id = 1")
	require.NoError(t, err, "a lock on another node does not block")
	_, err = tx.ExecContext(ctx, "UPDATE inventory SET available = available - 2 WHERE sku_id = 1")
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "the first transaction loses certification: %v", err)
	require.Equal(t, uint16(1213), me.Number)

	causalReadSeesTheLatestWrite(t, dbs[0], dbs[2])

	c.Nodes[1].Kill()
	require.Eventually(t, func() bool { n, err := c.Size(0); return err == nil && n == 2 }, 30e9, 100e6)
	c.Nodes[1].Start()
	n, err = c.Size(0)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the killed node rejoined")
}

// While node b's applier is held (FLUSH TABLES WITH READ LOCK pauses it), a
// write committed through node a is not visible in b yet: a plain read
// there is stale, a transaction of sqlexec.InCausalTx waits for it.
func causalReadSeesTheLatestWrite(t *testing.T, a, b *sqlx.DB) {
	ctx := context.Background()
	galera, err := sqlexec.Galera(ctx, b)
	require.NoError(t, err)
	require.True(t, galera)
	holder, err := b.Connx(ctx)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
	require.NoError(t, err)
	_, err = a.ExecContext(ctx, "UPDATE inventory SET available = 500 WHERE sku_id = 1")
	require.NoError(t, err)
	var stale int
	require.NoError(t, b.GetContext(ctx, &stale, "SELECT available FROM inventory WHERE sku_id = 1"))
	require.NotEqual(t, 500, stale, "a plain read on a node whose applier is held is stale")

	released := time.AfterFunc(500*time.Millisecond, func() { _, _ = holder.ExecContext(ctx, "UNLOCK TABLES") })
	defer released.Stop()
	var fresh int
	require.NoError(t, sqlexec.InCausalTx(ctx, b, true, func(tx *sqlx.Tx) error {
		return tx.GetContext(ctx, &fresh, "SELECT available FROM inventory WHERE sku_id = 1 FOR UPDATE")
	}))
	require.Equal(t, 500, fresh, "the causal read waited for the write")
	var after int
	require.NoError(t, b.GetContext(ctx, &after, "SELECT @@SESSION.wsrep_sync_wait"))
	require.Zero(t, after, "the pool's sessions keep the server default")
}
