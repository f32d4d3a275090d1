package delay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newClient(t *testing.T, b *testBundle) *Client {
	t.Helper()
	c, err := NewClient(b.db.DB, b.rdb, ClientConfig{KeyPrefix: b.prefix, Logger: b.log})
	require.NoError(t, err)
	return c
}

func TestRegisterIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()

	first, created, err := c.Register(ctx, Registration{BizUUID: "order-timeout-1001", Handler: "noop",
		Delay: time.Hour, Payload: map[string]string{"orderNo": "1001"}})
	require.NoError(t, err)
	require.True(t, created)
	require.Len(t, first.TraceID, 32)
	require.Equal(t, StatusPending, first.Status)
	require.Equal(t, DefaultMaxRetry, first.MaxRetry)
	require.JSONEq(t, `{"orderNo":"1001"}`, string(first.Payload))

	// A retry with other values returns the first task and changes nothing.
	again, created, err := c.Register(ctx, Registration{BizUUID: "order-timeout-1001", Handler: "other",
		Delay: time.Minute, Payload: map[string]string{"orderNo": "9999"}, MaxRetry: 7})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.TraceID, again.TraceID)
	require.Equal(t, "noop", again.Handler)
	require.JSONEq(t, `{"orderNo":"1001"}`, string(again.Payload))
	require.True(t, first.ExecuteTime.Equal(again.ExecuteTime), "%s vs %s", first.ExecuteTime, again.ExecuteTime)
	require.True(t, first.CreatedAt.Equal(again.CreatedAt))

	// The row is exactly what Register returned.
	got, err := c.Get(ctx, "order-timeout-1001")
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	require.True(t, first.NextAttemptTime.Equal(got.NextAttemptTime))

	// bizUuids are case-sensitive (ascii_bin).
	_, created, err = c.Register(ctx, Registration{BizUUID: "ORDER-timeout-1001", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	require.True(t, created)

	// Many concurrent registrations of one bizUuid create one task.
	var wg sync.WaitGroup
	traces := make([]string, 20)
	createdN := make([]bool, 20)
	for i := range 20 {
		wg.Go(func() {
			tk, cr, err := c.Register(ctx, Registration{BizUUID: "race-1", Handler: "noop", Delay: time.Hour})
			if err == nil {
				traces[i], createdN[i] = tk.TraceID, cr
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range 20 {
		require.Equal(t, traces[0], traces[i])
		if createdN[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "exactly one registration creates")
	var rows int
	require.NoError(t, b.db.Get(&rows, `SELECT COUNT(*) FROM job_delay_task WHERE biz_uuid = 'race-1'`))
	require.Equal(t, 1, rows)

	// The timer holds each PENDING task once.
	size, err := c.timer.size(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, size)
}

// RegisterTx lives and dies with the caller's transaction; the timer learns
// of it only through Schedule after the commit.
func TestRegisterTxFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()

	tx, err := b.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	tk, created, err := c.RegisterTx(ctx, tx, OrderTimeoutClose("A1", time.Now().Add(time.Hour)))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "order-timeout-A1", tk.BizUUID)
	require.NoError(t, tx.Rollback())
	_, err = c.Get(ctx, "order-timeout-A1")
	require.ErrorIs(t, err, ErrNotFound, "rolled back with the order")

	tx, err = b.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	tk, created, err = c.RegisterTx(ctx, tx, OrderTimeoutClose("A1", time.Now().Add(time.Hour)))
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, tx.Commit())
	size, err := c.timer.size(ctx)
	require.NoError(t, err)
	require.Zero(t, size, "RegisterTx does not touch the timer")
	require.NoError(t, c.Schedule(ctx, tk))
	size, err = c.timer.size(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, size)

	// A transaction whose snapshot predates the commit still finds the
	// existing task (locking read) instead of failing.
	tx2, err := b.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer tx2.Rollback() //nolint:errcheck // rolled back at the end whatever the test did
	var dummy int
	require.NoError(t, tx2.Get(&dummy, `SELECT COUNT(*) FROM job_delay_task`)) // opens the snapshot
	_, _, err = c.Register(ctx, Registration{BizUUID: "late-1", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	got, created, err := c.RegisterTx(ctx, tx2, Registration{BizUUID: "late-1", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "late-1", got.BizUUID)
}

func TestRegisterRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.fastConfig(map[string]HandlerFunc{"noop": func(context.Context, *Task) error { return nil }})
	cfg.Services = map[string]string{"svc": "http://127.0.0.1:1"}
	d := newDispatcher(t, cfg)
	c := d.Client()
	ctx := context.Background()
	ok := Registration{BizUUID: "x-1", Handler: "noop", Delay: time.Second}
	cases := []struct {
		name  string
		mod   func(r *Registration)
		field string
	}{
		{"no bizUuid", func(r *Registration) { r.BizUUID = "" }, "bizUuid"},
		{"slash in bizUuid", func(r *Registration) { r.BizUUID = "a/b" }, "bizUuid"},
		{"long bizUuid", func(r *Registration) { r.BizUUID = string(make([]byte, 129)) }, "bizUuid"},
		{"reserved bizUuid", func(r *Registration) { r.BizUUID = "stats" }, "bizUuid"},
		{"no handler", func(r *Registration) { r.Handler = "" }, "handler"},
		{"unknown handler", func(r *Registration) { r.Handler = "nope" }, "handler"},
		{"unknown service", func(r *Registration) { r.Handler = "http:other/x" }, "handler"},
		{"bad http handler", func(r *Registration) { r.Handler = "http:svc" }, "handler"},
		{"negative delay", func(r *Registration) { r.Delay = -time.Second }, "delayMs"},
		{"too far", func(r *Registration) { r.ExecuteTime = time.Now().Add(400 * 24 * time.Hour) }, "executeTime"},
		{"bad payload", func(r *Registration) { r.Payload = json.RawMessage(`{"a":`) }, "payload"},
		{"huge payload", func(r *Registration) { r.Payload = string(make([]byte, MaxPayloadBytes)) }, "payload"},
		{"maxRetry too high", func(r *Registration) { r.MaxRetry = MaxMaxRetry + 1 }, "maxRetry"},
	}
	for _, tc := range cases {
		r := ok
		tc.mod(&r)
		_, _, err := c.Register(ctx, r)
		var inv *InvalidError
		require.True(t, errors.As(err, &inv), "%s: got %v", tc.name, err)
		require.Equal(t, tc.field, inv.Field, tc.name)
	}
	_, _, err := c.Register(ctx, Registration{BizUUID: "svc-1", Handler: "http:svc/hook", Delay: time.Second})
	require.NoError(t, err)
	require.Equal(t, 1, b.countStatus(t, StatusPending))
}

func TestCancelAndRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()

	_, err := c.Cancel(ctx, "missing")
	require.ErrorIs(t, err, ErrNotFound)

	_, _, err = c.Register(ctx, Registration{BizUUID: "c-1", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	tk, err := c.Cancel(ctx, "c-1")
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, tk.Status)
	tk, err = c.Cancel(ctx, "c-1")
	require.NoError(t, err, "cancelling twice is fine")
	require.Equal(t, StatusCancelled, tk.Status)
	_, err = c.Requeue(ctx, "c-1")
	require.ErrorIs(t, err, ErrConflict, "only FAILED tasks are requeued")

	// Cancel inside the payment transaction.
	_, _, err = c.Register(ctx, Registration{BizUUID: "c-2", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	tx, err := b.db.BeginTxx(ctx, nil)
	require.NoError(t, err)
	tk, err = c.CancelTx(ctx, tx, "c-2")
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, tk.Status)
	require.NoError(t, tx.Rollback())
	require.Equal(t, StatusPending, b.task(t, "c-2").Status, "rolled back with the payment")

	// FAILED → requeue → PENDING with fresh retries, due now.
	_, err = b.db.Exec(`UPDATE job_delay_task SET status='FAILED', retry_count=4, last_error='boom' WHERE biz_uuid='c-2'`)
	require.NoError(t, err)
	tk, err = c.Requeue(ctx, "c-2")
	require.NoError(t, err)
	require.Equal(t, StatusPending, tk.Status)
	require.Zero(t, tk.RetryCount)
	require.Equal(t, "boom", tk.LastError, "the last error stays for the record")
	require.WithinDuration(t, time.Now(), tk.NextAttemptTime, 5*time.Second)
}

func TestPurgeKeepsWhatRetentionKeeps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()
	for i, st := range []Status{StatusPending, StatusRunning, StatusDone, StatusFailed, StatusCancelled} {
		for _, old := range []bool{false, true} {
			biz := bizN(string(st), i)
			if old {
				biz += "-old"
			}
			_, _, err := c.Register(ctx, Registration{BizUUID: biz, Handler: "noop", Delay: time.Hour})
			require.NoError(t, err)
			_, err = b.db.Exec(`UPDATE job_delay_task SET status = ? WHERE biz_uuid = ?`, string(st), biz)
			require.NoError(t, err)
			if old { // changed and due 8 days ago
				b.ageTask(t, biz, 8*24*time.Hour)
				_, err = b.db.Exec(`UPDATE job_delay_task SET next_attempt_time = next_attempt_time - INTERVAL 8 DAY WHERE biz_uuid = ?`, biz)
				require.NoError(t, err)
			}
		}
	}
	// Purge walks the terminal statuses by due time, the change time
	// checked on each: a task done just now that was due long ago, and one
	// cancelled long ago that would have been due in a day, stay.
	for biz, set := range map[string]string{
		"DONE-late":        `status = 'DONE', next_attempt_time = UTC_TIMESTAMP(3) - INTERVAL 9 DAY`,
		"CANCELLED-future": `status = 'CANCELLED', next_attempt_time = UTC_TIMESTAMP(3) + INTERVAL 1 DAY, updated_at = UTC_TIMESTAMP(3) - INTERVAL 9 DAY`,
	} {
		_, _, err := c.Register(ctx, Registration{BizUUID: biz, Handler: "noop", Delay: time.Hour})
		require.NoError(t, err)
		_, err = b.db.Exec(`UPDATE job_delay_task SET `+set+` WHERE biz_uuid = ?`, biz)
		require.NoError(t, err)
	}
	n, err := c.Purge(ctx, 7*24*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "old DONE and old CANCELLED")
	var left []string
	require.NoError(t, b.db.Select(&left, `SELECT biz_uuid FROM job_delay_task ORDER BY biz_uuid`))
	require.Equal(t, []string{"CANCELLED-4", "CANCELLED-future", "DONE-2", "DONE-late", "FAILED-3", "FAILED-3-old", "PENDING-0", "PENDING-0-old", "RUNNING-1", "RUNNING-1-old"}, left)
}

func TestStatsListCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()
	for i := range 5 {
		_, _, err := c.Register(ctx, Registration{BizUUID: bizN("due", i), Handler: "noop", ExecuteTime: time.Now().Add(-time.Minute)})
		require.NoError(t, err)
	}
	_, _, err := c.Register(ctx, Registration{BizUUID: "later", Handler: "noop", Delay: time.Hour})
	require.NoError(t, err)
	_, err = b.db.Exec(`UPDATE job_delay_task SET status='FAILED', last_error='no luck' WHERE biz_uuid='due-0'`)
	require.NoError(t, err)
	_, err = b.db.Exec(`UPDATE job_delay_task SET status='RUNNING', claim_id=7 WHERE biz_uuid='due-1'`)
	require.NoError(t, err)
	b.ageTask(t, "due-1", time.Hour)

	s, err := c.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, s.Total)
	require.EqualValues(t, 4, s.Counts[StatusPending])
	require.EqualValues(t, 1, s.Counts[StatusFailed])
	require.EqualValues(t, 0, s.Counts[StatusDone])
	require.EqualValues(t, 3, s.DueNow)
	require.EqualValues(t, 1, s.StuckRunning)
	require.NotNil(t, s.OldestDue)
	require.GreaterOrEqual(t, time.Duration(s.OldestDueAge), 50*time.Second)
	require.NotNil(t, s.TimerSize)

	failed, err := c.List(ctx, ListFilter{Status: StatusFailed})
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, "no luck", failed[0].LastError)
	all, err := c.List(ctx, ListFilter{Limit: 4})
	require.NoError(t, err)
	require.Len(t, all, 4)
	require.Equal(t, "later", all[0].BizUUID, "newest first")
	rest, err := c.List(ctx, ListFilter{BeforeID: all[3].ID})
	require.NoError(t, err)
	require.Len(t, rest, 2)
	_, err = c.List(ctx, ListFilter{Status: "NOPE"})
	require.Error(t, err)

	rep, err := c.Check(ctx)
	require.NoError(t, err)
	require.False(t, rep.OK, "a stuck task is a problem")
	require.Empty(t, rep.DuplicateBizUUIDs)
	require.EqualValues(t, 1, rep.StuckRunning)
	require.EqualValues(t, 1, rep.Failed)
}

// The unique key makes duplicates impossible; Check still finds them where
// it was dropped (a hand-made table, an old schema).
func TestCheckFindsDuplicateBizUUIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b)
	ctx := context.Background()
	_, err := b.db.Exec(`ALTER TABLE job_delay_task DROP INDEX uk_biz_uuid`)
	require.NoError(t, err)
	for range 2 {
		tk, err := c.newTask(ctx, Registration{BizUUID: "dup-1", Handler: "noop", Delay: time.Hour})
		require.NoError(t, err)
		require.NoError(t, store{}.insert(ctx, b.db, tk))
	}
	rep, err := c.Check(ctx)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.Equal(t, []Duplicate{{Value: "dup-1", N: 2}}, rep.DuplicateBizUUIDs)
}

func TestParseServices(t *testing.T) {
	t.Parallel()
	m, err := ParseServices([]string{"orders=http://127.0.0.1:8081/", " pay = https://pay.internal/base "})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"orders": "http://127.0.0.1:8081", "pay": "https://pay.internal/base"}, m)
	for _, bad := range [][]string{{"orders"}, {"orders=ftp://x"}, {"1x=http://a"}, {"a=http://x", "a=http://y"}, {"a=http://x?q=1"}} {
		_, err := ParseServices(bad)
		require.Error(t, err, "%v", bad)
	}
}
