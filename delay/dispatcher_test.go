package delay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/shard"
)

func TestDispatcherRunsTaskOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	rec.fn = func(ctx context.Context, tk *Task, _ int) error {
		Logger(ctx).InfoContext(ctx, "handler says hello")
		ReportOutcome(ctx, "greeted")
		return nil
	}
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"rec": rec.handle}))
	start(t, d)
	ctx := context.Background()

	tk, _, err := d.Client().Register(ctx, Registration{BizUUID: "on-time", Handler: "rec", Delay: 300 * time.Millisecond,
		Payload: map[string]int{"n": 1}})
	require.NoError(t, err)
	done := b.waitStatus(t, "on-time", StatusDone)
	require.Equal(t, 1, rec.count("on-time"))
	started := rec.startTimes("on-time")[0]
	require.False(t, started.Before(tk.ExecuteTime.Add(-5*time.Millisecond)), "never early: started %s, due %s", started, tk.ExecuteTime)
	require.Less(t, started.Sub(tk.ExecuteTime), time.Second, "on time")
	require.Zero(t, done.RetryCount)
	require.Zero(t, done.ClaimID)

	// The handler got the trace id, and every log line about the task
	// carries it.
	require.Equal(t, tk.TraceID, rec.traces["on-time"])
	var hello bool
	for _, l := range logLines(t, b.logBuf) {
		if l["msg"] == "handler says hello" || l["msg"] == "delayed task done" {
			require.Equal(t, tk.TraceID, l["trace_id"], "%v", l)
			hello = hello || l["msg"] == "handler says hello"
		}
	}
	require.True(t, hello)
	waitCounters(t, d, func(c Counters) bool { return c.Outcomes["greeted"] == 1 })
}

// Tasks registered in another process (no wake-up) are seen within
// PollInterval; many due at once all run once.
func TestTwoDispatchersRunEachTaskOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	handlers := map[string]HandlerFunc{"rec": rec.handle}
	d1 := newDispatcher(t, b.fastConfig(handlers))
	d2 := newDispatcher(t, b.onOwnConnections(t, b.fastConfig(handlers)))
	start(t, d1)
	start(t, d2)

	reg, err := NewClient(b.db.DB, b.rdb, ClientConfig{KeyPrefix: b.prefix})
	require.NoError(t, err)
	ctx := context.Background()
	const n = 400
	at := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, _, err := reg.Register(ctx, Registration{BizUUID: bizN("race", i), Handler: "rec", ExecuteTime: at})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// The sweep races the timer on the same tasks.
	b.sweepRace(t, d1, d2, n, rec.count)
	c1, c2 := d1.Counters(), d2.Counters()
	t.Logf("dispatcher 1 ran %d, dispatcher 2 ran %d", c1.Done, c2.Done)
}

func TestFailingTwiceThenSucceedingFollowsBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	rec.fn = func(_ context.Context, _ *Task, n int) error {
		if n <= 2 {
			return fmt.Errorf("attempt %d fails", n)
		}
		return nil
	}
	cfg := b.fastConfig(map[string]HandlerFunc{"flaky": rec.handle})
	cfg.BackoffBase = 200 * time.Millisecond
	d := newDispatcher(t, cfg)
	start(t, d)
	ctx := context.Background()
	_, _, err := d.Client().Register(ctx, Registration{BizUUID: "flaky-1", Handler: "flaky", Delay: 0})
	require.NoError(t, err)

	// After the first failure the row holds the retry and its time.
	var after1 *Task
	require.Eventually(t, func() bool {
		after1 = b.task(t, "flaky-1")
		return after1.RetryCount >= 1
	}, waitLong, 5*time.Millisecond)
	require.Contains(t, after1.LastError, "attempt 1 fails")

	tk := b.waitStatus(t, "flaky-1", StatusDone)
	require.Equal(t, 2, tk.RetryCount)
	require.Contains(t, tk.LastError, "attempt 2 fails")
	starts := rec.startTimes("flaky-1")
	require.Len(t, starts, 3)
	// Failure n waits between half and all of base × 2^(n-1).
	gap1, gap2 := starts[1].Sub(starts[0]), starts[2].Sub(starts[1])
	require.GreaterOrEqual(t, gap1, 100*time.Millisecond-5*time.Millisecond, "first retry after ≥ base/2")
	require.GreaterOrEqual(t, gap2, 200*time.Millisecond-5*time.Millisecond, "second retry after ≥ base")
	require.Less(t, gap1, 200*time.Millisecond+time.Second, "first retry not much after base")
	require.Less(t, gap2, 400*time.Millisecond+time.Second, "second retry not much after 2 × base")
	waitCounters(t, d, func(c Counters) bool { return c.Retried == 2 })
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{BackoffBase: time.Second, BackoffMax: 10 * time.Second}}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 60: 10 * time.Second} {
		for range 200 {
			got := d.cfg.retrySchedule().Delay(n)
			require.GreaterOrEqual(t, got, want/2, "failure %d", n)
			require.LessOrEqual(t, got, want, "failure %d", n)
		}
	}
}

func TestOutOfRetriesAndPermanentFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	rec.fn = func(_ context.Context, tk *Task, n int) error {
		if tk.BizUUID == "perm" {
			return Permanent(errors.New("payload is nonsense"))
		}
		if tk.BizUUID == "panics" {
			panic("handler bug")
		}
		return errors.New("always")
	}
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"bad": rec.handle}))
	start(t, d)
	ctx := context.Background()
	for _, biz := range []string{"always", "perm", "panics"} {
		_, _, err := d.Client().Register(ctx, Registration{BizUUID: biz, Handler: "bad", MaxRetry: 1})
		require.NoError(t, err)
	}
	tk := b.waitStatus(t, "always", StatusFailed)
	require.Equal(t, 2, tk.RetryCount, "first attempt + 1 retry")
	require.Equal(t, 2, rec.count("always"))
	tk = b.waitStatus(t, "perm", StatusFailed)
	require.Equal(t, 1, rec.count("perm"), "a permanent error is not retried")
	require.Contains(t, tk.LastError, "payload is nonsense")
	tk = b.waitStatus(t, "panics", StatusFailed)
	require.Contains(t, tk.LastError, "panicked: handler bug")

	// An operator requeues it: it runs again with fresh retries.
	_, err := d.Client().Requeue(ctx, "perm")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.count("perm") == 2 }, waitLong, 10*time.Millisecond)
	b.waitStatus(t, "perm", StatusFailed)
}

func TestCancelBeforeAndAfterFiring(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"rec": rec.handle}))
	start(t, d)
	ctx := context.Background()
	c := d.Client()

	// Before: cancelled while PENDING (its timer entry stays); when it comes
	// due, the claim drops it and the sweep finds nothing.
	_, _, err := c.Register(ctx, Registration{BizUUID: "before", Handler: "rec", Delay: 200 * time.Millisecond})
	require.NoError(t, err)
	tk, err := c.Cancel(ctx, "before")
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, tk.Status)
	// A later task is a marker: once it ran, the cancelled one was popped.
	_, _, err = c.Register(ctx, Registration{BizUUID: "marker", Handler: "rec", Delay: 400 * time.Millisecond})
	require.NoError(t, err)
	b.waitStatus(t, "marker", StatusDone)
	res, err := d.Sweep(ctx, SweepOptions{})
	require.NoError(t, err)
	require.Zero(t, res.Found)
	require.Zero(t, rec.count("before"))
	require.Equal(t, StatusCancelled, b.task(t, "before").Status)

	// After: a DONE task cannot be cancelled; it stays DONE.
	_, _, err = c.Register(ctx, Registration{BizUUID: "after", Handler: "rec"})
	require.NoError(t, err)
	b.waitStatus(t, "after", StatusDone)
	tk, err = c.Cancel(ctx, "after")
	require.ErrorIs(t, err, ErrConflict)
	require.Equal(t, StatusDone, tk.Status)
	require.Equal(t, StatusDone, b.task(t, "after").Status)
}

// A dispatcher that dies after its handler acted but before recording the
// result leaves the task RUNNING; past the RUNNING limit another dispatcher
// recovers it and runs it again, and the handler's own CAS makes the second
// run a no-op. (With the real order close: handlers'
// TestDelayOrderCloseKilledDispatcherClosesOnce.)
func TestKilledDispatcherTaskIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closer := newFakeCloser("K1")
	dying := delaytest.NewDying(t, b.db.DSN)
	cfgA := b.fastConfig(map[string]HandlerFunc{OrderTimeoutCloseHandler: func(ctx context.Context, tk *Task) error {
		err := closer.handler()(ctx, tk)
		dying.Die() // the process "dies": its result write cannot reach the database
		return err
	}})
	cfgA.db = dying.DB
	a := newDispatcher(t, cfgA)
	require.NoError(t, a.Start(context.Background()))
	ctx := context.Background()
	_, _, err := a.Client().Register(ctx, OrderTimeoutClose("K1", time.Now()))
	require.NoError(t, err)
	dying.Stop(t, a)
	require.EqualValues(t, 1, a.Counters().Lost)
	tk := b.task(t, "order-timeout-K1")
	require.Equal(t, StatusRunning, tk.Status, "the result was never recorded")
	require.EqualValues(t, 1, closer.closes.Load())

	cfgB := b.fastConfig(map[string]HandlerFunc{OrderTimeoutCloseHandler: closer.handler()})
	cfgB.RunningTimeout, cfgB.HandlerTimeout = delaytest.RecoveryRunningTimeout, delaytest.RecoveryHandlerTimeout
	bd := newDispatcher(t, cfgB)
	rec, failed, err := bd.RecoverStuck(ctx)
	require.NoError(t, err)
	require.Zero(t, rec+failed, "not stuck yet: younger than the RUNNING limit")

	b.ageTask(t, "order-timeout-K1", delaytest.PastRunningTimeout) // time passes
	start(t, bd)                                                   // its first maintenance round recovers
	tk = b.waitStatus(t, "order-timeout-K1", StatusDone)
	require.Equal(t, 1, tk.RetryCount, "the lost attempt counts")
	require.Contains(t, tk.LastError, "recovered: RUNNING")
	require.EqualValues(t, 1, closer.closes.Load(), "closed once")
	require.EqualValues(t, 2, closer.calls.Load(), "run twice")
	waitCounters(t, bd, func(c Counters) bool { return c.Outcomes["skipped_closed"] == 1 && c.Recovered == 1 })
}

// A runner whose claim was recovered and re-claimed cannot record its
// result over the new claim's.
func TestStaleClaimWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"x": func(context.Context, *Task) error { return nil }}))
	ctx := context.Background()
	tk, _, err := d.Client().Register(ctx, Registration{BizUUID: "fence", Handler: "x"})
	require.NoError(t, err)
	old, err := store{}.claim(ctx, b.db.DB, []int64{tk.ID}, 11, nil, nil)
	require.NoError(t, err)
	require.Len(t, old, 1)
	again, err := store{}.claim(ctx, b.db.DB, []int64{tk.ID}, 12, nil, nil)
	require.NoError(t, err)
	require.Empty(t, again, "a RUNNING task cannot be claimed twice")

	b.ageTask(t, "fence", time.Hour)
	rec, _, err := d.RecoverStuck(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rec)
	cur, err := store{}.claim(ctx, b.db.DB, []int64{tk.ID}, 13, nil, nil)
	require.NoError(t, err)
	require.Len(t, cur, 1)

	ok, err := store{}.done(ctx, b.db, old[0])
	require.NoError(t, err)
	require.False(t, ok, "the old claim's DONE is discarded")
	ok, err = store{}.retry(ctx, b.db, old[0], time.Now(), "late failure")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = store{}.done(ctx, b.db, cur[0])
	require.NoError(t, err)
	require.True(t, ok)
}

// Losing the timer's data loses no task: the reconciler puts PENDING rows
// back within its interval.
func TestTimerKeysDeletedTasksStillRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	cfg := b.fastConfig(map[string]HandlerFunc{"rec": rec.handle})
	cfg.ReconcileInterval = 500 * time.Millisecond
	d := newDispatcher(t, cfg)
	ctx := context.Background()
	const n = 50
	at := time.Now().Add(800 * time.Millisecond)
	for i := range n {
		_, _, err := d.Client().Register(ctx, Registration{BizUUID: bizN("flush", i), Handler: "rec", ExecuteTime: at})
		require.NoError(t, err)
	}
	start(t, d)
	// Redis loses everything under the prefix (a FLUSHALL, scoped to this
	// test on the shared server).
	keys, err := b.rdb.Keys(ctx, b.prefix+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, b.rdb.Del(ctx, keys...).Err())

	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, waitLong, 20*time.Millisecond)
	for i := range n {
		biz := bizN("flush", i)
		require.Equal(t, 1, rec.count(biz))
		late := rec.startTimes(biz)[0].Sub(at)
		// A reconcile period and slack for a loaded CI machine under -race
		// (1.78 s was seen at load 13); without the reconciler's refill
		// the tasks never run at all.
		require.Less(t, late, cfg.ReconcileInterval+3*time.Second, "within the reconcile period")
	}
}

// With Redis down at registration and restarted empty, tasks run after the
// reconciler refills the timer. A private redis-server is stopped and
// started.
func TestRedisRestartedEmptyTasksStillRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	rec := newRecorder()
	cfg := b.fastConfig(map[string]HandlerFunc{"rec": rec.handle})
	cfg.rdb = rdb
	cfg.ReconcileInterval = 300 * time.Millisecond
	d := newDispatcher(t, cfg)
	start(t, d)
	ctx := context.Background()

	srv.Stop()
	for i := range 10 {
		_, created, err := d.Client().Register(ctx, Registration{BizUUID: bizN("down", i), Handler: "rec", Delay: 100 * time.Millisecond})
		require.NoError(t, err, "registration does not need Redis")
		require.True(t, created)
	}
	require.Contains(t, b.logBuf.String(), "the reconciler will schedule it")
	require.Zero(t, rec.total())
	srv.Start()
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == 10 }, waitLong, 20*time.Millisecond)
	require.Equal(t, 10, rec.total())
}

func TestStopGivesInFlightTasksBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startedCh := make(chan struct{})
	var once sync.Once
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"slow": func(ctx context.Context, _ *Task) error {
		once.Do(func() { close(startedCh) })
		<-ctx.Done()
		return context.Cause(ctx)
	}}))
	require.NoError(t, d.Start(context.Background()))
	ctx := context.Background()
	_, _, err := d.Client().Register(ctx, Registration{BizUUID: "slow-1", Handler: "slow"})
	require.NoError(t, err)
	<-startedCh
	stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = d.Stop(stopCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "it had to cancel")
	require.NoError(t, d.Stop(ctx), "stopping twice is fine")
	tk := b.task(t, "slow-1")
	require.Equal(t, StatusPending, tk.Status)
	require.Zero(t, tk.RetryCount, "shutdown spends no retry")
	require.Contains(t, tk.LastError, "released")
	require.EqualValues(t, 1, d.Counters().Released)
}

func TestSlowHandlerIsCancelledAtHandlerTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	cfg := b.fastConfig(map[string]HandlerFunc{"slow": func(ctx context.Context, _ *Task) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	cfg.RunningTimeout, cfg.HandlerTimeout = time.Second, 200*time.Millisecond
	d := newDispatcher(t, cfg)
	start(t, d)
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "slow-2", Handler: "slow"})
	require.NoError(t, err)
	tk := b.waitStatus(t, "slow-2", StatusDone)
	require.Equal(t, 1, tk.RetryCount)
	require.Contains(t, tk.LastError, "timed out after 200ms")
	require.Zero(t, d.Counters().Recovered, "cancelled before the RUNNING limit, never recovered")
}

func TestHTTPHandlerPostsWithTraceID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type call struct {
		path, trace, biz, auth, attempt, body string
	}
	var mu sync.Mutex
	var calls []call
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, call{r.URL.Path, r.Header.Get("X-Trace-Id"), r.Header.Get("X-Biz-Uuid"),
			r.Header.Get("Authorization"), r.Header.Get("X-Delay-Attempt"), string(body)})
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(svc.Close)
	cfg := b.fastConfig(nil)
	cfg.Services = map[string]string{"orders": svc.URL + "/"}
	cfg.ServiceToken = "s3cret"
	d := newDispatcher(t, cfg)
	start(t, d)
	t.Cleanup(d.http.CloseIdleConnections)
	tk, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "hook-1",
		Handler: "http:orders/internal/close", Payload: map[string]string{"orderNo": "H1"}})
	require.NoError(t, err)
	done := b.waitStatus(t, "hook-1", StatusDone)
	require.Equal(t, 1, done.RetryCount)
	require.Contains(t, done.LastError, "status 503: busy")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 2)
	for i, c := range calls {
		require.Equal(t, "/internal/close", c.path)
		require.Equal(t, tk.TraceID, c.trace)
		require.Equal(t, "hook-1", c.biz)
		require.Equal(t, "Bearer s3cret", c.auth)
		require.Equal(t, fmt.Sprint(i+1), c.attempt)
		require.JSONEq(t, `{"orderNo":"H1"}`, c.body)
	}
}

// A service answering with a body that is not UTF-8 (an error page in GBK)
// had its reply written into last_error as it was: the utf8mb4 column
// refused the UPDATE (Error 1366), so the failure was never recorded and
// the task stayed RUNNING until recovered. The reply's bytes are now
// made text first, and the task fails with it.
func TestHTTPHandlerReplyNotUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=gbk")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("\xb6\xa9\xb5\xa5 O-1 \xb2\xbb\xb4\xe6\xd4\xda")) // 订单 O-1 不存在
	}))
	t.Cleanup(svc.Close)
	cfg := b.fastConfig(nil)
	cfg.Services = map[string]string{"orders": svc.URL}
	d := newDispatcher(t, cfg)
	start(t, d)
	t.Cleanup(d.http.CloseIdleConnections)
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "gbk-1", Handler: "http:orders/close", MaxRetry: -1})
	require.NoError(t, err)
	tk := b.waitStatus(t, "gbk-1", StatusFailed)
	require.Contains(t, tk.LastError, "status 500: \uFFFD O-1 \uFFFD")
	require.True(t, utf8.ValidString(tk.LastError), "%q", tk.LastError)
	require.Zero(t, d.Counters().Recovered, "failed by its attempt, not recovered")
}

// The sweep claims what the timer missed, shard by shard, without Start.
func TestSweepShardsRunMissedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"rec": rec.handle}))
	ctx := context.Background()
	c, err := NewClient(b.db.DB, nil, ClientConfig{}) // no Redis: the timer never hears of them
	require.NoError(t, err)
	const n = 30
	for i := range n {
		_, _, err := c.Register(ctx, Registration{BizUUID: bizN("missed", i), Handler: "rec", ExecuteTime: time.Now().Add(-time.Minute)})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	results := make([]SweepResult, 2)
	for shard := range 2 {
		wg.Go(func() {
			r, err := d.Sweep(ctx, SweepOptions{ShardIndex: shard, ShardTotal: 2, Limit: 100})
			if err != nil {
				t.Error(err)
			}
			results[shard] = r
		})
	}
	wg.Wait()
	require.Equal(t, n, results[0].Done+results[1].Done)
	require.Equal(t, n, results[0].Found+results[1].Found)
	var ids []int64
	require.NoError(t, b.db.SelectContext(ctx, &ids, `SELECT id FROM job_delay_task`))
	perShard := shard.Counts(ids, 2)
	require.Equal(t, perShard, []int{results[0].Found, results[1].Found}, "each shard found the tasks shard.Of gives it")
	require.NotZero(t, results[0].Done)
	require.NotZero(t, results[1].Done)
	require.Equal(t, n, b.countStatus(t, StatusDone))
	require.Equal(t, n, rec.total())
	require.Contains(t, results[0].String(), "done=")

	_, err = d.Sweep(ctx, SweepOptions{ShardIndex: 2, ShardTotal: 2})
	require.Error(t, err)
}

func TestStaleTimerEntryIsNotRunEarly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"rec": rec.handle}))
	ctx := context.Background()
	tk, _, err := d.Client().Register(ctx, Registration{BizUUID: "later", Handler: "rec", Delay: time.Hour})
	require.NoError(t, err)
	// A stale entry says it is due now.
	require.NoError(t, d.timer.add(ctx, timerEntry{ID: tk.ID, Time: time.Now().Add(-time.Second)}))
	start(t, d)
	require.Eventually(t, func() bool {
		s, err := b.rdb.ZScore(ctx, b.prefix+"timer", fmt.Sprint(tk.ID)).Result()
		return err == nil && int64(s) == tk.NextAttemptTime.UnixMilli()
	}, waitLong, 10*time.Millisecond, "put back with its true time")
	require.Zero(t, rec.total())
	require.Equal(t, StatusPending, b.task(t, "later").Status)
}
