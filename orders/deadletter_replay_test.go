package orders_test

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/internal/shard"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/deadletters"
)

// letterRow is a dead letter as the tests read it.
type letterRow struct {
	ID           int64     `db:"id"`
	OrderNo      string    `db:"order_no"`
	Stage        string    `db:"stage"`
	Status       string    `db:"status"`
	StatusReason string    `db:"status_reason"`
	LastError    string    `db:"last_error"`
	Attempts     int       `db:"attempts"`
	NextRetryAt  time.Time `db:"next_retry_at"`
}

// letters reads the close stage's dead letters, by order number.
func (b *testBundle) letters(t *testing.T) map[string]letterRow {
	t.Helper()
	return b.lettersWhere(t, `stage = 'close'`)
}

// deadLetters reads the dead letters of every stage, by order number.
func (b *testBundle) deadLetters(t *testing.T) map[string]letterRow {
	t.Helper()
	return b.lettersWhere(t, `TRUE`)
}

func (b *testBundle) lettersWhere(t *testing.T, cond string) map[string]letterRow {
	t.Helper()
	var rows []letterRow
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows,
		`SELECT id, order_no, stage, status, status_reason, last_error, attempts, next_retry_at FROM order_dead_letter WHERE `+cond))
	out := map[string]letterRow{}
	for _, r := range rows {
		out[r.OrderNo] = r
	}
	return out
}

// makeDue moves every waiting letter's retry time into the past, as if the
// backoff had run out.
func (b *testBundle) makeDue(t *testing.T) {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_dead_letter SET next_retry_at = NOW(3) - INTERVAL 1 SECOND WHERE status = 'waiting'`)
	require.NoError(t, err)
}

// failingLetters builds n due orders holding SKU 5, which has no inventory
// row, and three due orders that do not, then runs the close sweep: the
// three close and the n are dead-lettered (waiting, attempts 1). It returns
// the n and a function that makes SKU 5's row, which fixes them.
func failingLetters(t *testing.T, b *testBundle, n int) (victims []string, restore func()) {
	t.Helper()
	const sku = 5
	poisoned := numbered("L", n, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Coupon: i%3 == 0,
			Items: []ordertest.Item{{SKU: sku, Qty: int64(1 + i%3), MissingStock: true}, {SKU: int64(1 + i%4), Qty: 1}}}
	})
	for _, o := range poisoned {
		victims = append(victims, o.OrderNo)
	}
	b.build(t, append(poisoned, numbered("OK", 3, func(i int) ordertest.OrderOpts {
		return ordertest.OrderOpts{Age: time.Hour, Items: []ordertest.Item{{SKU: int64(1 + i), Qty: 2}}}
	})...)...)
	st := b.run(t, orders.RunOptions{})
	require.Equal(t, 3, st.Closed)
	require.Equal(t, n, st.DeadLettered)
	return victims, func() { ordertest.Restock(t, b.DB.DB, sku, 100) }
}

var retryBackoff = orders.DeadLetterBackoff{Base: time.Minute, Max: time.Hour, ParkAfter: 4}

// Letters not due yet are untouched; due ones whose data was fixed are
// closed once and resolved (kept, with the reason); a second run finds
// nothing.
func TestRetryDeadLettersClosesDueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, restore := failingLetters(t, b, 30)
	before := b.letters(t)

	st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Found, "next_retry_at is a minute away")
	require.Equal(t, before, b.letters(t), "not-due letters untouched")

	restore()
	base := b.Snapshot(t)
	b.makeDue(t)
	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{PageSize: 7})
	require.NoError(t, err)
	require.Equal(t, len(victims), st.Found)
	require.Equal(t, len(victims), st.Closed)
	require.Equal(t, (len(victims)+6)/7, st.Pages)
	require.Contains(t, st.String(), fmt.Sprintf("closed=%d already_done=0 failed=0 parked=0 skipped=0", len(victims)))
	for _, no := range victims {
		dl := b.letters(t)[no]
		require.Equal(t, deadletters.Resolved, dl.Status, no)
		require.Equal(t, "closed by deadLetterRetryJob", dl.StatusReason)
		require.Equal(t, 1, dl.Attempts, "a success does not count as an attempt")
	}
	require.Zero(t, b.Counts(t).Unpaid)
	b.Check(t, base)

	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Found, "resolved letters are not taken again")
	b.Check(t, base)
}

// A close that fails again raises attempts with a doubled backoff; a second
// run right after changes nothing; at the maximum the letter is parked with
// the reason and never taken again until an operator requeues it; then the
// fixed order closes.
func TestRetryDeadLettersBackoffThenPark(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, restore := failingLetters(t, b, 8)
	base := b.Snapshot(t)

	for attempt := 2; attempt <= 3; attempt++ {
		b.makeDue(t)
		now := b.DB.Now(t)
		st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
		require.NoError(t, err)
		require.Equal(t, len(victims), st.Failed)
		require.Equal(t, len(victims), st.Found)
		for _, no := range victims {
			dl := b.letters(t)[no]
			require.Equal(t, deadletters.Waiting, dl.Status)
			require.Equal(t, attempt, dl.Attempts)
			require.Contains(t, dl.LastError, "inventory row of sku 5 is missing")
			want := now.Add(time.Minute << (attempt - 1))
			require.WithinDuration(t, want, dl.NextRetryAt, 20*time.Second, "backoff doubles")
		}
		// Twice in a row: the second run finds nothing due.
		again, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
		require.NoError(t, err)
		require.Zero(t, again.Found)
		require.Equal(t, attempt, b.letters(t)[victims[0]].Attempts)
	}

	b.makeDue(t)
	st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Equal(t, len(victims), st.Parked)
	for _, no := range victims {
		dl := b.letters(t)[no]
		require.Equal(t, deadletters.Parked, dl.Status)
		require.Equal(t, 4, dl.Attempts)
		require.Equal(t, "parked after 4 failed attempts (maximum 4); see last_error", dl.StatusReason)
	}
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_dead_letter SET next_retry_at = NOW(3) - INTERVAL 1 DAY`)
	require.NoError(t, err)
	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Zero(t, st.Found, "parked letters wait for a person")

	// The operator fixes the data and requeues one letter: it is due at once
	// and closes; the others stay parked.
	restore()
	base = b.Snapshot(t)
	dl, err := deadletters.New(b.DB.DB).Requeue(b.Ctx, victims[0], "")
	require.NoError(t, err)
	require.Equal(t, deadletters.Waiting, dl.Status)
	require.Empty(t, dl.StatusReason)
	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	require.Equal(t, deadletters.Resolved, b.letters(t)[victims[0]].Status)
	require.Equal(t, deadletters.Parked, b.letters(t)[victims[1]].Status)
	b.Check(t, base)
}

// Letters whose order was paid or closed meanwhile are resolved as counted
// no-ops; a letter whose order is gone is parked with the reason; letters of
// other stages are not this job's.
func TestRetryDeadLettersAlreadyDone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const paid, closed = "PAID", "DUE"
	b.build(t,
		ordertest.OrderOpts{OrderNo: paid, Status: 1, Coupon: true, Items: []ordertest.Item{{SKU: 1, Qty: 2}}},
		ordertest.OrderOpts{OrderNo: closed, Age: time.Hour, Coupon: true, Items: []ordertest.Item{{SKU: 1, Qty: 1}, {SKU: 2, Qty: 3}}})
	st := b.run(t, orders.RunOptions{})
	require.Equal(t, 1, st.Closed)
	base := b.Snapshot(t)
	_, err := b.DB.ExecContext(b.Ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at) VALUES
		(?, 'close', 'waiting', 'old failure', 2, NOW(3) - INTERVAL 1 MINUTE),
		(?, 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE),
		('GONE-1', 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE),
		(?, 'payment', 'waiting', 'not ours', 1, NOW(3) - INTERVAL 1 MINUTE)`, paid, closed, paid)
	require.NoError(t, err)

	rs, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Equal(t, orders.RetryStats{Found: 3, AlreadyDone: 2, Parked: 1, Pages: 1}, retryStatsNoTime(rs))
	dls := b.letters(t)
	require.Equal(t, deadletters.Resolved, dls[paid].Status)
	require.Equal(t, "order is paid; nothing to close", dls[paid].StatusReason)
	require.Equal(t, 2, dls[paid].Attempts)
	require.Equal(t, deadletters.Resolved, dls[closed].Status)
	require.Contains(t, dls[closed].StatusReason, "no longer unpaid")
	require.Equal(t, deadletters.Parked, dls["GONE-1"].Status)
	require.Equal(t, "order not found in order_info", dls["GONE-1"].StatusReason)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE stage = 'payment' AND status = 'waiting'`))
	b.Check(t, base)

	rs, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Zero(t, rs.Found)
}

func retryStatsNoTime(s orders.RetryStats) orders.RetryStats {
	s.Elapsed = 0
	return s
}

// Two executors running the retry at once, on the same shard, twice: every
// letter is replayed once per due time (attempts raised by exactly one),
// every fixable order closed once, and each letter counted once as handled
// and otherwise as skipped.
func TestRetryDeadLettersConcurrentRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, _ := failingLetters(t, b, 40)
	// Half the letters become closable: their orders lose the missing SKU's
	// line (and its locked quantity, which is gone with the row anyway).
	fixable := victims[:len(victims)/2]
	for _, no := range fixable {
		_, err := b.DB.ExecContext(b.Ctx, `DELETE FROM order_item WHERE order_no = ? AND sku_id = 5`, no)
		require.NoError(t, err)
	}
	base := b.Snapshot(t)
	b.makeDue(t)

	other := b.newCloser(t, orders.CloserConfig{DeadLetterBackoff: retryBackoff})
	var mu sync.Mutex
	var total orders.RetryStats
	var wg sync.WaitGroup
	for _, c := range []*orders.Closer{b.Closer, other, b.Closer, other} {
		wg.Go(func() {
			st, err := c.RetryDeadLetters(b.Ctx, orders.RetryOptions{PageSize: 10})
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			total.Found += st.Found
			total.Closed += st.Closed
			total.Failed += st.Failed
			total.Skipped += st.Skipped
			total.AlreadyDone += st.AlreadyDone
			total.Parked += st.Parked
		})
	}
	wg.Wait()
	require.Equal(t, len(fixable), total.Closed)
	require.Equal(t, len(victims)-len(fixable), total.Failed)
	require.Zero(t, total.Parked)
	require.Equal(t, total.Found, total.Closed+total.Failed+total.Skipped+total.AlreadyDone)
	for i, no := range victims {
		dl := b.letters(t)[no]
		if i < len(fixable) {
			require.Equal(t, deadletters.Resolved, dl.Status, no)
			require.Equal(t, 1, dl.Attempts, no)
		} else {
			require.Equal(t, deadletters.Waiting, dl.Status, no)
			require.Equal(t, 2, dl.Attempts, "replayed once: %s", no)
		}
	}
	b.Check(t, base)
}

// Sharded runs split the letters by id: each is handled by exactly one
// shard.
func TestRetryDeadLettersSharded(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, restore := failingLetters(t, b, 24)
	restore()
	base := b.Snapshot(t)
	b.makeDue(t)

	waiting := func() []int {
		return shard.Counts(b.ids(t, `SELECT id FROM order_dead_letter WHERE status = 'waiting'`), 3)
	}
	seen := 0
	for i := range 3 {
		want := waiting()[i]
		st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{ShardIndex: i, ShardTotal: 3})
		require.NoError(t, err)
		require.Equal(t, want, st.Found, "shard %d", i)
		require.Equal(t, want, st.Closed)
		require.Zero(t, waiting()[i], "shard %d left none of its letters waiting", i)
		seen += st.Found
	}
	require.Equal(t, len(victims), seen)
	b.Check(t, base)
}

// A dry run counts and changes nothing; MaxLetters caps a run; bad options
// are refused before anything is read.
func TestRetryDeadLettersDryRunAndOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, restore := failingLetters(t, b, 10)
	restore()
	b.makeDue(t)
	before := b.letters(t)

	st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, len(victims), st.Found)
	require.Zero(t, st.Closed+st.Failed+st.Skipped)
	require.Equal(t, before, b.letters(t))

	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{MaxLetters: 2, PageSize: 1})
	require.NoError(t, err)
	require.Equal(t, 2, st.Found)
	require.Equal(t, 2, st.Closed)

	for _, opt := range []orders.RetryOptions{
		{ShardIndex: 3, ShardTotal: 3}, {ShardIndex: -1}, {PageSize: 5001}, {PageSize: -1}, {MaxLetters: -1},
	} {
		_, err := b.Closer.RetryDeadLetters(b.Ctx, opt)
		require.Error(t, err, "%+v", opt)
	}
	require.Equal(t, len(victims)-2, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter WHERE status = 'waiting'`))
}

// An order whose lock is held elsewhere (a payment in progress) is left
// alone: the letter keeps its attempts and is retried after the claim runs
// out.
func TestRetryDeadLettersLockedOrderSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithCloser(orders.CloserConfig{DeadLetterBackoff: retryBackoff}))
	victims, restore := failingLetters(t, b, 6)
	restore()
	base := b.Snapshot(t)
	b.makeDue(t)
	lease, err := b.Locker.Acquire(b.Ctx, victims[:1])
	require.NoError(t, err)
	require.True(t, lease.Held(victims[0]))

	st, err := b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.NoError(t, lease.Release(b.Ctx))
	require.Equal(t, 1, st.Skipped)
	require.Equal(t, len(victims)-1, st.Closed)
	dl := b.letters(t)[victims[0]]
	require.Equal(t, deadletters.Waiting, dl.Status)
	require.Equal(t, 1, dl.Attempts)
	require.True(t, dl.NextRetryAt.After(b.DB.Now(t)), "claimed until the replay's worst case")

	b.makeDue(t)
	st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	require.NoError(t, ordertest.Check(b.Ctx, b.DB, base))
}

// letterDeadlock makes the statement on order no's close dead letter that
// matches stmt (a LIKE pattern on the PROCESSLIST's INFO) a deadlock's
// victim while run runs, and returns run's error. It inserts that letter,
// due a minute ago, and a later one (order LATER, due in 2030). other, a
// transaction heavier than any single statement (300 ballast rows
// updated), locks the later letter's entry of idx_status_retry and the gap
// before it (a next-key lock, under REPEATABLE READ), where a statement
// moving the due letter's entry to its next retry time puts it; not the
// due letter's row. Once the statement has waited there 50 ms, holding
// that row, other asks for the row: a deadlock, and InnoDB rolls back the
// lighter one, the statement.
func (b *testBundle) letterDeadlock(t *testing.T, no, stmt string, run func() error) error {
	t.Helper()
	ctx := b.Ctx
	_, err := b.DB.ExecContext(ctx, `INSERT INTO order_dead_letter (order_no, stage, status, last_error, attempts, next_retry_at) VALUES
		(?, 'close', 'waiting', 'old failure', 1, NOW(3) - INTERVAL 1 MINUTE),
		('LATER', 'close', 'waiting', 'old failure', 1, '2030-01-01 00:00:00')`, no)
	require.NoError(t, err)
	letter := b.letters(t)[no]
	_, err = b.DB.ExecContext(ctx, `CREATE TABLE ballast (id INT PRIMARY KEY, n INT NOT NULL)`)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(ctx, `INSERT INTO ballast SELECT seq, 0 FROM seq_1_to_300`)
	require.NoError(t, err)

	other, err := b.DB.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.ExecContext(ctx, `UPDATE ballast SET n = n + 1`)
	require.NoError(t, err)
	_, err = other.ExecContext(ctx, `SELECT id FROM order_dead_letter FORCE INDEX (idx_status_retry)
		WHERE status = 'waiting' AND next_retry_at > NOW() + INTERVAL 1 DAY FOR UPDATE`)
	require.NoError(t, err)

	ran := make(chan error, 1)
	go func() { ran <- run() }()
	// The statement holds the due letter's row and waits for the gap.
	require.Eventually(t, func() bool {
		return b.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()
			AND INFO LIKE ? AND TIME_MS > 50`, "%"+stmt+"%") > 0
	}, 10*time.Second, 20*time.Millisecond)
	// Now other waits for the statement's row: a deadlock.
	_, err = other.ExecContext(ctx, `SELECT id FROM order_dead_letter WHERE id = ? FOR UPDATE`, letter.ID)
	require.NoError(t, err, "InnoDB should roll back the lighter statement, %s", stmt)
	require.NoError(t, other.Rollback())
	return <-ran
}

// A claim rolled back as a deadlock's victim is run again, and the run goes
// on: another transaction holds the gap of idx_status_retry where the
// claim moves its letter's entry, and once the claim holds the letter's row
// and waits for that gap, asks for the row.
func TestRetryDeadLettersClaimRunAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const due = "DEADLOCK-L"
	base := b.build(t, ordertest.OrderOpts{OrderNo: due, Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 2}}})
	var st orders.RetryStats
	err := b.letterDeadlock(t, due, "UPDATE order_dead_letter SET next_retry_at", func() (err error) {
		st, err = b.Closer.RetryDeadLetters(b.Ctx, orders.RetryOptions{})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, orders.RetryStats{Found: 1, Closed: 1, Pages: 1}, retryStatsNoTime(st))
	dl := b.letters(t)[due]
	require.Equal(t, deadletters.Resolved, dl.Status)
	require.Equal(t, "closed by deadLetterRetryJob", dl.StatusReason)
	require.Zero(t, b.Counts(t).Unpaid)
	require.Equal(t, deadletters.Waiting, b.letters(t)["LATER"].Status)
	b.Check(t, base)
}
