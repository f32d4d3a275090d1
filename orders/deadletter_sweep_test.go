package orders_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/orderstatus"
)

// unpaidIn is the number of an unpaid order of table in s: the first by
// id, or the last.
func (s *sweepSource) unpaidIn(t *testing.T, table string, last bool) string {
	t.Helper()
	order := "ASC"
	if last {
		order = "DESC"
	}
	var no string
	require.NoError(t, s.db.Get(&no, "SELECT order_no FROM "+table+" WHERE status = ? ORDER BY id "+order+" LIMIT 1", orderstatus.Unpaid))
	return no
}

// addLetter writes a waiting close dead letter of orderNo, due a minute
// ago, naming table (empty: a letter written before migration 0138), and
// returns orderNo.
func (s *sweepSource) addLetter(t *testing.T, orderNo, table string) string {
	t.Helper()
	_, err := s.db.Exec(`INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at, order_table)
		VALUES (?, 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE, ?)`, orderNo, table)
	require.NoError(t, err)
	return orderNo
}

// letter reads the status and reason of orderNo's close letter in s.
func (s *sweepSource) letter(t *testing.T, orderNo string) (status, reason string) {
	t.Helper()
	row := s.db.QueryRow("SELECT status, status_reason FROM order_dead_letter WHERE order_no = ? AND stage = 'close'", orderNo)
	require.NoError(t, row.Scan(&status, &reason))
	return status, reason
}

// closedIn counts the closed orders of s's tables.
func (s *sweepSource) closedIn(t *testing.T) int {
	t.Helper()
	n := 0
	for _, table := range s.tables {
		var k int
		require.NoError(t, s.db.Get(&k, "SELECT COUNT(*) FROM "+table+" WHERE status = ?", orderstatus.Closed))
		n += k
	}
	return n
}

// 2 databases x 3 tables, letters in both, most in the second database:
// each letter's order is closed in the table the letter names, a letter
// written before its table was recorded is found in whichever table of
// its database holds the order, and one whose order is in none is parked.
// 1 to 3 broadcast executors at once retry each letter once.
func TestSweepRetriesLettersInTheirSourceAndTable(t *testing.T) {
	t.Parallel()
	for executors := 1; executors <= 3; executors++ {
		t.Run(fmt.Sprintf("%d executors", executors), func(t *testing.T) {
			t.Parallel()
			sources, units := sweepWorld(t, 2, sweepTables, 4)
			db0, db1 := sources[0], sources[1]
			want := map[*sweepSource][]string{
				db0: {db0.addLetter(t, db0.unpaidIn(t, db0.tables[0], false), db0.tables[0])},
				db1: {
					db1.addLetter(t, db1.unpaidIn(t, db1.tables[1], false), db1.tables[1]),
					db1.addLetter(t, db1.unpaidIn(t, db1.tables[2], false), db1.tables[2]),
					db1.addLetter(t, db1.unpaidIn(t, db1.tables[2], true), ""),
				},
			}
			gone := db1.addLetter(t, "NO-SUCH-ORDER", "")

			sweep, err := orders.NewSweep(units...)
			require.NoError(t, err)
			results := make([]orders.RetrySweepResult, executors)
			var wg sync.WaitGroup
			for i := range executors {
				wg.Go(func() {
					results[i] = sweep.RetryDeadLetters(context.Background(), orders.RetryOptions{ShardIndex: i, ShardTotal: executors}, nil)
				})
			}
			wg.Wait()
			var closed, parked int
			for i, res := range results {
				require.NoError(t, res.Err(), "executor %d", i)
				closed += res.Total.Closed
				parked += res.Total.Parked
			}
			require.Equal(t, 4, closed, "each letter's order closed once")
			require.Equal(t, 1, parked)
			for s, nos := range want {
				require.Equal(t, len(nos), s.closedIn(t), "%s: only the letters' orders are closed", s.name)
				for _, no := range nos {
					status, reason := s.letter(t, no)
					require.Equal(t, "resolved", status, "%s %s", s.name, no)
					require.Equal(t, "closed by deadLetterRetryJob", reason)
				}
			}
			status, reason := db1.letter(t, gone)
			require.Equal(t, "parked", status)
			require.Equal(t, "order not found in the 3 order tables of source db1", reason)
		})
	}
}

// A source that cannot be reached fails its own units, the first with the
// connection's error and the rest without trying; the other source's
// letters are retried.
func TestSweepRetryOneSourceDown(t *testing.T) {
	t.Parallel()
	sources, units := sweepWorld(t, 1, sweepTables, 4)
	up := sources[0]
	no := up.addLetter(t, up.unpaidIn(t, up.tables[1], false), up.tables[1])
	down := sqlx.MustOpen("mysql", "root@tcp(127.0.0.1:1)/down?parseTime=true&timeout=2s")
	t.Cleanup(func() { down.Close() })
	locker := lockerOf(t)
	for _, table := range []string{"order_info_0", "order_info_1"} {
		c, err := orders.NewCloser(down, locker, unitConfig(t, "down", table))
		require.NoError(t, err)
		units = append(units, c)
	}
	sweep, err := orders.NewSweep(units...)
	require.NoError(t, err)
	var done []string
	res := sweep.RetryDeadLetters(context.Background(), orders.RetryOptions{}, func(u orders.UnitRetry) { done = append(done, u.Name()) })
	require.Len(t, done, len(units))
	failed := res.Failed()
	require.Len(t, failed, 2)
	require.Equal(t, "down/order_info_0", failed[0].Name())
	require.ErrorContains(t, failed[0].Err, "connection refused")
	require.True(t, failed[0].Started)
	require.EqualError(t, failed[1].Err, "not started: source down cannot be reached: "+failed[0].Err.Error())
	require.False(t, failed[1].Started)
	require.Equal(t, 1, res.Total.Closed)
	status, _ := up.letter(t, no)
	require.Equal(t, "resolved", status)
}

// lockerOf is a page locker on the test's own Redis prefix.
func lockerOf(t *testing.T) *orderlock.Locker {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: prefix})
	require.NoError(t, err)
	return locker
}
