package orders_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// A close through node 2 of a Galera cluster, of an order whose header node
// 2 has applied but whose lines, written through node 1 in a later
// transaction, it has not yet (its applier held by FLUSH TABLES WITH READ
// LOCK for half a second): the close reads the lines causally, so it gives
// back the order's stock. A plain read found no lines there, and the order
// was closed with its stock still locked (the multi-writer fault scenario's
// lost stock).
func TestCloseThroughALaggingGaleraNodeGivesBackTheStock(t *testing.T) {
	ctx := context.Background()
	c := mariadbtest.StartGalera(t, 2)
	dbs, _ := c.NewDB(t, "orders_galera")
	rc, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rc, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(dbs[1], locker, orders.CloserConfig{})
	require.NoError(t, err)

	ordertest.Order(t, dbs[0], ordertest.OrderOpts{OrderNo: "G-1", Age: 2 * time.Hour})
	_, err = dbs[0].ExecContext(ctx, "INSERT INTO inventory (sku_id, available, locked) VALUES (5, 8, 2)")
	require.NoError(t, err)
	reader := causalReader(t, dbs[1])
	var headers int
	require.NoError(t, reader.GetContext(ctx, &headers, "SELECT COUNT(*) FROM order_info WHERE order_no = 'G-1'"))
	require.Equal(t, 1, headers, "node 2 applied the order's header")

	holder, err := dbs[1].Connx(ctx)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
	require.NoError(t, err)
	_, err = dbs[0].ExecContext(ctx, "INSERT INTO order_item (order_no, sku_id, quantity) VALUES ('G-1', 5, 2)")
	require.NoError(t, err)
	var lines int
	require.NoError(t, dbs[1].GetContext(ctx, &lines, "SELECT COUNT(*) FROM order_item WHERE order_no = 'G-1'"))
	require.Zero(t, lines, "node 2 has not applied the lines yet")
	released := time.AfterFunc(500*time.Millisecond, func() { _, _ = holder.ExecContext(ctx, "UNLOCK TABLES") })
	defer released.Stop()

	st, err := closer.Run(ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	var stock struct{ Available, Locked int64 }
	require.NoError(t, reader.GetContext(ctx, &stock, "SELECT available, locked FROM inventory WHERE sku_id = 5"))
	require.Equal(t, struct{ Available, Locked int64 }{10, 0}, stock, "the close gave back the order's stock")
}

// causalReader is a connection to db's node whose reads wait until the
// node has applied what the cluster committed.
func causalReader(t *testing.T, db *sqlx.DB) *sqlx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Connx(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1")
	require.NoError(t, err)
	return conn
}
