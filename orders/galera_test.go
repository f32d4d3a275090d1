package orders_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/outbox"
)

// The close and the outbox relay with several writers of a two-node Galera
// cluster (one cluster for both: it takes a while to start).
func TestSeveralGaleraWriters(t *testing.T) {
	c := mariadbtest.StartGalera(t, 2)
	t.Run("close through a lagging node", func(t *testing.T) { closeThroughALaggingNode(t, c) })
	t.Run("relays on two nodes", func(t *testing.T) { relaysOnTwoNodes(t, c) })
}

// A close through node 2 of an order whose header node 2 has applied but
// whose lines, written through node 1 in a later transaction, it has not
// yet (its applier held by FLUSH TABLES WITH READ LOCK for half a second):
// the close reads the lines causally, so it gives back the order's stock.
// A plain read found no lines there, and the order was closed with its
// stock still locked (the lost stock of fault scenario 13 before).
func closeThroughALaggingNode(t *testing.T, c *mariadbtest.Cluster) {
	ctx := context.Background()
	dbs, _ := c.NewDB(t, "orders_galera_close")
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

// Two relays, on node 1 and node 2, claim the same due events at the same
// moment, round after round: each node's SKIP LOCKED sees only its own
// locks, so one claim loses certification (1213). That claim is counted
// (ClaimsLost) and tried again, never a failed pass; every event is
// delivered and marked done exactly once.
func relaysOnTwoNodes(t *testing.T, c *mariadbtest.Cluster) {
	ctx := context.Background()
	dbs, _ := c.NewDB(t, "orders_galera_relay")
	rc, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rc, Prefix: prefix})
	require.NoError(t, err)
	closer, err := orders.NewCloser(dbs[0], locker, orders.CloserConfig{Compensation: orders.CompensateOutbox})
	require.NoError(t, err)
	_, err = orderdemo.Generate(ctx, dbs[0], orderdemo.Spec{Orders: 300, DueFraction: 1, CouponFraction: 0.5, SKUs: 20})
	require.NoError(t, err)
	st, err := closer.Run(ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 300, st.Closed)
	var events int
	require.NoError(t, causalReader(t, dbs[1]).GetContext(ctx, &events, "SELECT COUNT(*) FROM order_outbox"))
	require.Positive(t, events)

	// The receivers acknowledge every delivery (outbox's tests check what
	// they are sent).
	ack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(ack.Close)
	cfg := outbox.RelayConfig{Timeout: time.Second, BatchSize: 25, Workers: 4, ClaimTTL: 4 * time.Second,
		Endpoints: map[string]string{
			outbox.EventStockRelease:  ack.URL + "/stock/release",
			outbox.EventCouponRestore: ack.URL + "/coupons/restore",
		}, Token: "svc-token"}
	var relays []*outbox.Relay
	for _, db := range dbs {
		r, err := outbox.NewRelay(db, cfg)
		require.NoError(t, err)
		relays = append(relays, r)
	}
	var total outbox.RelayStats
	for round := 0; total.Delivered < events; round++ {
		require.Less(t, round, 100, "delivered %d of %d events", total.Delivered, events)
		var wg sync.WaitGroup
		stats := make([]outbox.RelayStats, len(relays))
		errs := make([]error, len(relays))
		for i, r := range relays {
			wg.Go(func() { stats[i], errs[i] = r.RunOnce(ctx) })
		}
		wg.Wait()
		for i := range relays {
			require.NoError(t, errs[i], "relay on node %d, round %d", i+1, round)
			total.Delivered += stats[i].Delivered
			total.ClaimsLost += stats[i].ClaimsLost
			total.Superseded += stats[i].Superseded
		}
	}
	t.Logf("%d events: %+v", events, total)
	require.Equal(t, events, total.Delivered, "each event marked done exactly once")
	require.Zero(t, total.Superseded)
	require.Positive(t, total.ClaimsLost, "claims lost to the other node's")
	require.Equal(t, total.ClaimsLost, relays[0].Stats().ClaimsLost+relays[1].Stats().ClaimsLost, "Stats counts them")
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
