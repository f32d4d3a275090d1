package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// Scenario 10: a three-node MariaDB Galera cluster used as a single writer
// (every executor and the payments through node 1, as behind a proxy or a
// virtual IP), and node 1 killed (SIGKILL) in the middle of the runs. The
// runs fail cleanly or finish, never hang; the two nodes left keep a quorum;
// the run after the switch, through node 2, closes every due order not
// paid; the invariants hold; no order is dead-lettered for the node's loss.
func scenarioGalera(t *testing.T, h *harness, r *report) {
	ctx := context.Background()
	g := newGaleraRig(t, h, "faults_galera")
	cluster, dbs, dsns, e := g.cluster, g.dbs, g.dsns, g.env

	// Paced to last about 3 s, so that the node dies in the middle.
	param := fmt.Sprintf("pageSize=100,maxPerSecond=%d", max(200, g.res.Due/6))
	runs := []*child{
		h.start(t, "node1-shard0", e, runArgs(param, "0/2")...),
		h.start(t, "node1-shard1", e, runArgs(param, "1/2")...),
	}
	killed := time.AfterFunc(1200*time.Millisecond, cluster.Nodes[0].Kill)
	defer killed.Stop()
	pays := payThroughNode(t, ctx, dbs[0], g.rc, g.prefix, runs, true)
	failed := 0
	for _, c := range runs {
		switch code := c.wait(t, 2*time.Minute); code {
		case 0:
		case 1:
			failed++
		default:
			t.Fatalf("%s exit code %d (want 0 or 1); stderr:\n%s", c.name, code, tail(c.stderr.String(), 20))
		}
	}
	// The two nodes left form the cluster once they have given up on node
	// 1 (evs.suspect_timeout, 5 s); until then a write on them waits, as a
	// proxy's health check would notice. Then the writer's address leads to
	// node 2.
	require.Eventually(t, func() bool { n, err := cluster.Size(1); return err == nil && n == 2 },
		30*time.Second, 100*time.Millisecond, "the two nodes left form the cluster")
	final := h.runJob(t, "final-node2", e.with("MYSQL_DSN", dsns[1]), "pageSize=500", "")
	require.Equal(t, 0, final.code, "the run after the switch; stderr:\n%s", tail(final.stderr.String(), 20))

	l := measureCausal(t, dsns[1], g.base)
	r.add("3 nodes, single writer; node 1 killed mid-run: %d of 2 runs failed cleanly; payments %s; after the switch the run on node 2 closed %d",
		failed, pays, parseSummary(final.stdout.String()).Closed)
	r.final(l)
	requireClean(t, l)
}

// Scenario 13: a three-node Galera cluster with several writers. Two
// executors close through nodes 1 and 2 (shards 0/2 and 1/2) while the
// payments go through node 3. Galera does not block a write on one node for
// a row locked on another: the loser of a certification conflict gets 1213
// at its next statement or at COMMIT, which the close retries or skips,
// counts (conflicts=N in the run log) and never dead-letters. The closes
// read the order lines causally (wsrep_sync_wait), so an order is never
// closed without the lines its node has not applied yet. The run after,
// through node 3, closes what was skipped; every invariant holds.
func scenarioGaleraMulti(t *testing.T, h *harness, r *report) {
	ctx := context.Background()
	g := newGaleraRig(t, h, "faults_galera_multi")
	dbs, dsns, e := g.dbs, g.dsns, g.env

	param := fmt.Sprintf("pageSize=100,maxPerSecond=%d", max(200, g.res.Due/4))
	runs := []*child{
		h.start(t, "node1-shard0", e, runArgs(param, "0/2")...),
		h.start(t, "node2-shard1", e.with("MYSQL_DSN", dsns[1]), runArgs(param, "1/2")...),
	}
	pays := payThroughNode(t, ctx, dbs[2], g.rc, g.prefix, runs, false)
	var conflicts, closedByRuns int
	for _, c := range runs {
		require.Equal(t, 0, c.wait(t, 2*time.Minute), "%s; stderr:\n%s", c.name, tail(c.stderr.String(), 20))
		sum := parseSummary(c.stdout.String())
		require.True(t, sum.Found, "%s: %s", c.name, tail(c.stdout.String(), 5))
		require.Zero(t, sum.DeadLettered, "%s dead-lettered orders", c.name)
		closedByRuns += sum.Closed
		conflicts += sum.Conflicts
	}
	// Orders skipped as contended are closed by the next run.
	final := h.runJob(t, "final-node3", e.with("MYSQL_DSN", dsns[2]), "pageSize=500", "")
	require.Equal(t, 0, final.code, "the run after; stderr:\n%s", tail(final.stderr.String(), 20))
	closedByRuns += parseSummary(final.stdout.String()).Closed

	l := measureCausal(t, dsns[0], g.base)
	r.add("3 nodes, closes through nodes 1 and 2, payments %s through node 3; close transactions rolled back by a conflict (counted, none dead-lettered): %d; the run after on node 3 closed %d",
		pays, conflicts, parseSummary(final.stdout.String()).Closed)
	r.final(l)
	requireClean(t, l)
	require.Equal(t, l.Closed, closedByRuns, "each close reported by exactly one process")
}

// galeraRig is a three-node cluster with demo orders (few SKUs: closes of
// different orders often share stock rows), their baseline, a Redis
// prefix, and the executors' settings on node 1.
type galeraRig struct {
	cluster *mariadbtest.Cluster
	dbs     []*sqlx.DB
	dsns    []string
	rc      *redis.Client
	prefix  string
	res     orderdemo.Result
	base    *ordertest.Baseline
	env     env
}

func newGaleraRig(t *testing.T, h *harness, name string) galeraRig {
	t.Helper()
	g := galeraRig{cluster: mariadbtest.StartGalera(t, 3)}
	g.dbs, g.dsns = g.cluster.NewDB(t, name)
	g.rc, g.prefix = redistest.Client(t)
	g.res = demoSKUs(t, g.dbs[0], h.p.galeraOrders, 9, 40)
	g.base = snapshot(t, g.dbs[0])
	g.env = baseEnv(t, g.dsns[0], redistest.Addr(), g.prefix)
	return g
}

// measureCausal measures through the node at dsn with causal reads: what
// another node committed last may not be applied there yet.
func measureCausal(t *testing.T, dsn string, base *ordertest.Baseline) ledger {
	t.Helper()
	check, err := sqlx.Open("mysql", dsn+"&wsrep_sync_wait=1")
	require.NoError(t, err)
	defer check.Close()
	l := measure(t, check, base, time.Time{})
	var paidClosed int
	require.NoError(t, check.Get(&paidClosed, `SELECT COUNT(*) FROM order_info o JOIN order_payment p ON p.order_no = o.order_no WHERE o.status = 2`))
	if paidClosed > 0 {
		l.Violations = append(l.Violations, fmt.Sprintf("paid_closed: %d orders both paid and closed", paidClosed))
	}
	return l
}

// payments counts what payThroughNode's payments came to.
type payments struct{ paid, late, again int }

func (p payments) String() string {
	return fmt.Sprintf("%d paid, %d found closed, %d to try again", p.paid, p.late, p.again)
}

// payThroughNode pays random unpaid orders through db (one node) with the
// real payment path, under the same order locks as the close, until every
// run in runs has exited. A payment that finds the order locked or loses a
// conflict is one the shopper tries again; with nodeDies, so is one that
// lost its connection. Any other error fails the test.
func payThroughNode(t *testing.T, ctx context.Context, db *sqlx.DB, rc *redis.Client, prefix string, runs []*child, nodeDies bool) payments {
	t.Helper()
	locker, err := orderlock.New(orderlock.Config{Client: rc, Prefix: prefix, TTL: 2 * time.Second})
	require.NoError(t, err)
	svc, err := payment.NewService(db, locker, payment.ServiceConfig{LockTries: 4})
	require.NoError(t, err)
	var nos []string
	require.NoError(t, db.SelectContext(ctx, &nos, "SELECT order_no FROM order_info WHERE status = 0"))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	rng.Shuffle(len(nos), func(i, j int) { nos[i], nos[j] = nos[j], nos[i] })
	var wg sync.WaitGroup
	var mu sync.Mutex
	var p payments
	jobs := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for no := range jobs {
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				out, err := svc.Pay(pctx, no)
				cancel()
				kind := dbserver.KindOf(err)
				mu.Lock()
				switch {
				case err == nil && out == payment.Paid:
					p.paid++
				case err == nil && out == payment.AlreadyClosed:
					p.late++
				case errors.Is(err, payment.ErrOrderLocked), kind == dbserver.KindContention,
					nodeDies && (kind == dbserver.KindConnection || kind == dbserver.KindCanceled):
					p.again++
				default:
					t.Errorf("pay %s: %v %v", no, out, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, no := range nos {
		if allExited(runs) {
			break
		}
		jobs <- no
	}
	close(jobs)
	wg.Wait()
	return p
}

func allExited(cs []*child) bool {
	for _, c := range cs {
		if !c.exited() {
			return false
		}
	}
	return true
}
