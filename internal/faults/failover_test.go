package faults_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// Scenario 12: a primary with a replica (private servers, GTID replication
// on loopback) behind a TCP forwarder standing in for the virtual IP; one
// long-lived `executor serve` closes through the forwarder. The primary
// stops taking writes (read_only=1, and it stays up read-only), the replica
// catches up and is promoted, and the forwarder sends new connections to
// it. Connections made before the switch stay up and lead to the old
// primary, as after a DNS switch or a proxy's. Twice, on new servers:
//
//   - mid-run, with the executor's pool settings: the interrupted runs fail
//     cleanly (code 500 with a hint) or finish;
//   - between runs, the pool's connections all idle towards the old primary
//     (the default mysql.connMaxIdleTime is 1m): the run 5 s after the
//     switch takes them one by one, each answered read-only and discarded,
//     and runs its close transaction again on a new connection.
//
// Each time the first run triggered 5 s after the switch closes every due
// order; nothing is doubled, lost or dead-lettered.
func scenarioPrimaryFailover(t *testing.T, h *harness, r *report) {
	t.Run("mid-run", func(t *testing.T) { primaryFailover(t, h, r, false) })
	t.Run("between-runs", func(t *testing.T) { primaryFailover(t, h, r, true) })
}

func primaryFailover(t *testing.T, h *harness, r *report, betweenRuns bool) {
	ctx := context.Background()
	primary := mariadbtest.Start(t, mariadbtest.Options{Args: mariadbtest.PrimaryArgs(1)})
	replica := mariadbtest.Start(t, mariadbtest.Options{Args: mariadbtest.ReplicaArgs(2)})
	require.NoError(t, replica.ReplicateFrom(ctx, primary))
	const dbName = "faults_failover"
	db, _ := primary.NewDB(t, dbName)
	// read_only does not stop root (READ ONLY ADMIN): the executor's user
	// is an ordinary one, as in production. It replicates with the rest.
	require.NoError(t, primary.CreateUser(ctx, "executor", "pw", dbName))
	res := demo(t, db, h.p.switchOrders, 12)
	base := snapshot(t, db)
	require.NoError(t, replica.WaitCaughtUp(ctx, primary, 30*time.Second))

	vip := newForwarder(t, primary.Addr)
	dsn := mysql.NewConfig()
	dsn.User, dsn.Passwd, dsn.Net, dsn.Addr, dsn.DBName = "executor", "pw", "tcp", vip.addr(), dbName
	dsn.ParseTime, dsn.Loc, dsn.InterpolateParams = true, time.UTC, true
	_, prefix := redistest.Client(t)
	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	e := serveEnv(baseEnv(t, dsn.FormatDSN(), redistest.Addr(), prefix), admin, freePort(t))
	phase := "mid-run"
	if betweenRuns {
		phase = "between runs"
	}
	s := h.serve(t, "serve", e)

	// Four shards of one broadcast, so the pool holds several connections.
	// Mid-run: each paced to last about 4 s, the primary goes read-only
	// after 1.5 s. Between runs: shards 0-3 of 5 run to the end first, shard
	// 4's orders are left for the run after the switch.
	const shards = 4
	if betweenRuns {
		for i := range shards {
			s.trigger(t, 12, int64(1+i), "pageSize=100", i, shards+1)
		}
		for i := range shards {
			cb, err := admin.WaitCallback(int64(1+i), 90*time.Second)
			require.NoError(t, err)
			require.Equal(t, 200, cb.HandleCode, "shard %d before the switch: %s", i, cb.HandleMsg)
		}
	} else {
		param := fmt.Sprintf("pageSize=100,maxPerSecond=%d", max(50, res.Due/4/shards))
		for i := range shards {
			s.trigger(t, 12, int64(1+i), param, i, shards)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	began := time.Now()
	require.NoError(t, primary.Exec(ctx, "SET GLOBAL read_only = 1"))
	require.NoError(t, replica.WaitCaughtUp(ctx, primary, 30*time.Second))
	require.NoError(t, replica.Promote(ctx))
	vip.switchTo(replica.Addr)
	switched := time.Now()
	r.add("%s: switch took %.2fs (read-only, caught up, promoted, forwarder moved); %d connections to the old primary open",
		phase, switched.Sub(began).Seconds(), vip.openTo(primary.Addr))

	if !betweenRuns {
		interruptedRuns(t, admin, r, shards)
	}
	after := snapshotDB(t, replica.DSN(dbName))
	requireNoHalfClose(t, after, base, "after the interrupted runs")

	time.Sleep(time.Until(switched.Add(5 * time.Second)))
	stale := vip.openTo(primary.Addr)
	p := s.trigger(t, 12, 10, "pageSize=500", 0, 1)
	cb, err := admin.WaitCallback(p.LogID, 90*time.Second)
	require.NoError(t, err, "the first run after the switch never ended")
	require.Equal(t, 200, cb.HandleCode, "the first run 5 s after the switch (%d connections to the old primary open): %s", stale, cb.HandleMsg)
	sum := parseSummary(cb.HandleMsg)
	require.True(t, sum.Found, cb.HandleMsg)
	r.add("%s: run 5 s after the switch (%d connections to the old primary open): closed=%d, code 200", phase, stale, sum.Closed)
	s.stop(t)

	l := measure(t, after, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
	var oldClosed, newClosed int
	require.NoError(t, db.Get(&oldClosed, "SELECT COUNT(*) FROM order_info WHERE status = 2"))
	require.NoError(t, after.Get(&newClosed, "SELECT COUNT(*) FROM order_info WHERE status = 2"))
	require.LessOrEqual(t, oldClosed, newClosed, "the old primary has no close the new one lacks")
}

// interruptedRuns waits for the callbacks of logIds 1..shards: each run
// finished (200) or failed cleanly (500, saying why and what next).
func interruptedRuns(t *testing.T, admin *xxljobtest.Admin, r *report, shards int) {
	t.Helper()
	failed, finished := 0, 0
	for i := range shards {
		cb, err := admin.WaitCallback(int64(1+i), 90*time.Second)
		require.NoError(t, err, "interrupted run of shard %d never ended", i)
		switch cb.HandleCode {
		case 200:
			finished++
		case 500:
			failed++
			msg := strings.ToLower(cb.HandleMsg)
			require.True(t, strings.Contains(msg, "read-only") || strings.Contains(msg, "next run"),
				"a failed run says why and what next: %s", cb.HandleMsg)
			if failed == 1 {
				r.add("first failure: %q", cb.HandleMsg[max(0, strings.Index(cb.HandleMsg, "seconds=")):])
			}
		default:
			t.Fatalf("interrupted run of shard %d: code %d: %s", i, cb.HandleCode, cb.HandleMsg)
		}
	}
	r.add("interrupted runs: %d failed cleanly, %d finished", failed, finished)
}

// snapshotDB opens dsn for the rest of the test.
func snapshotDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// forwarder is a TCP forwarder on a loopback port standing in for a
// virtual IP or a DNS name: each new connection goes to the current
// target; switchTo changes the target for new connections only, and the
// ones open stay with the old target, as after a DNS or proxy switch
// (a virtual IP moved to another host would reset them instead).
type forwarder struct {
	l net.Listener

	mu     sync.Mutex
	target string
	open   map[net.Conn]string // client side -> its target
	wg     sync.WaitGroup
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &forwarder{l: l, target: target, open: map[net.Conn]string{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) addr() string { return f.l.Addr().String() }

func (f *forwarder) switchTo(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = target
}

// openTo counts the client connections open to target.
func (f *forwarder) openTo(target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, to := range f.open {
		if to == target {
			n++
		}
	}
	return n
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return // closed
		}
		f.mu.Lock()
		target := f.target
		f.open[c] = target
		f.wg.Add(1)
		f.mu.Unlock()
		go f.pipe(c, target)
	}
}

// pipe copies both ways between client c and target until either side
// ends, then closes both.
func (f *forwarder) pipe(c net.Conn, target string) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.open, c)
		f.mu.Unlock()
		c.Close()
	}()
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // an error is either side going away: the connection ends
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}

// close stops accepting, ends every open connection and waits for their
// goroutines.
func (f *forwarder) close() {
	f.l.Close()
	f.mu.Lock()
	for c := range f.open {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
