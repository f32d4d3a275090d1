package delay

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// Delayed tasks with writers on both nodes of a two-node Galera cluster.
func TestSeveralGaleraWriters(t *testing.T) {
	c := mariadbtest.StartGalera(t, 2)
	// Off, each node's own retry of an autocommit statement that lost
	// certification (wsrep_retry_autocommit, default 1) does not hide the
	// 1213 from the client; it applies to connections opened after.
	for i := range c.Nodes {
		admin, err := sqlx.Open("mysql", c.DSN(i, ""))
		require.NoError(t, err)
		_, err = admin.Exec("SET GLOBAL wsrep_retry_autocommit = 0")
		admin.Close()
		require.NoError(t, err)
	}
	dbs, _ := c.NewDB(t, "delay_galera")
	rdb, prefix := redistest.Client(t)
	var clients []*Client
	for _, db := range dbs {
		cl, err := NewClient(db, rdb, ClientConfig{KeyPrefix: prefix})
		require.NoError(t, err)
		clients = append(clients, cl)
	}
	t.Run("a registration through each node", func(t *testing.T) { registerThroughTwoNodes(t, dbs, clients) })
	t.Run("a claim waits for the cluster", func(t *testing.T) { claimWaitsForTheCluster(t, dbs, clients[0]) })
}

// The same bizUuid registered through both nodes at the same moment: one
// insert wins certification, the other fails with 1213 where one server
// answers 1062. Both registrations succeed,
// one created, both returning the same task.
func registerThroughTwoNodes(t *testing.T, dbs []*sqlx.DB, clients []*Client) {
	ctx := context.Background()
	for i := range 40 {
		biz := fmt.Sprintf("galera-twice-%d", i)
		var wg sync.WaitGroup
		start := make(chan struct{})
		tasks := make([]*Task, len(clients))
		created := make([]bool, len(clients))
		errs := make([]error, len(clients))
		for n, cl := range clients {
			wg.Go(func() {
				<-start
				tasks[n], created[n], errs[n] = cl.Register(ctx, Registration{BizUUID: biz, Handler: "noop", Delay: time.Hour})
			})
		}
		close(start)
		wg.Wait()
		for n := range clients {
			require.NoError(t, errs[n], "%s through node %d", biz, n+1)
		}
		require.NotEqual(t, created[0], created[1], "%s created exactly once", biz)
		require.Equal(t, tasks[0].TraceID, tasks[1].TraceID, "%s: both return the task", biz)
	}
}

// A claim through node 2 of a task registered through node 1 a moment ago
// runs on a session that waits until node 2 has applied it
// (wsrep_sync_wait), so it finds the task PENDING instead of dropping it
// from the timer; the session's setting goes back to the default after.
func claimWaitsForTheCluster(t *testing.T, dbs []*sqlx.DB, node1 *Client) {
	ctx := context.Background()
	task, created, err := node1.Register(ctx, Registration{BizUUID: "galera-claim", Handler: "noop"})
	require.NoError(t, err)
	require.True(t, created)
	var during int
	tasks, err := store{}.claim(ctx, dbs[1], []int64{task.ID}, 77, nil, func(ctx context.Context, conn *sqlx.Conn) {
		require.NoError(t, conn.GetContext(ctx, &during, "SELECT @@SESSION.wsrep_sync_wait"))
	})
	require.NoError(t, err)
	require.Len(t, tasks, 1, "claimed through the other node")
	require.NotZero(t, during, "the claim's session waits for the cluster")
	dbs[1].SetMaxOpenConns(1) // the claim's connection, back in the pool
	var after int
	require.NoError(t, dbs[1].GetContext(ctx, &after, "SELECT @@SESSION.wsrep_sync_wait"))
	require.Zero(t, after, "the pool's sessions keep the server default")
}
