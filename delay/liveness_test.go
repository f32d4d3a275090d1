package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// With Redis down, the order's lock cannot be taken: each sweep pass is
// "not now", which spends no retry, however many passes come; once Redis is
// back, the task closes its order.
func TestRedisDownSweepsSpendNoRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	locker, err := orderlock.New(orderlock.Config{Client: rdb, Prefix: b.prefix})
	require.NoError(t, err)
	svc, err := orders.NewService(b.db.DB, locker, orders.ServiceConfig{})
	require.NoError(t, err)
	closer, err := orders.NewCloser(b.db.DB, locker, orders.CloserConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, svc.AddStock(ctx, 1, 10))
	_, err = svc.PlaceOrder(ctx, orders.NewOrder{OrderNo: "DOWN-1", UserID: 1, Items: []orders.Item{{SKUID: 1, Quantity: 1}}, TimeoutMinutes: 1})
	require.NoError(t, err)
	placedAgo(t, b.db.DB, "DOWN-1", 2*time.Minute)

	cfg := b.fastConfig(nil)
	cfg.rdb = rdb
	cfg.BatchHandlers = map[string]BatchHandlerFunc{OrderTimeoutCloseHandler: OrderCloseBatchHandler(closer.CloseOrders)}
	cfg.NotNowBackoff, cfg.NotNowBackoffMax = 20*time.Millisecond, 40*time.Millisecond
	d := newDispatcher(t, cfg) // not started: only the sweep runs tasks here
	_, _, err = d.Client().Register(ctx, OrderTimeoutClose("DOWN-1", time.Now()))
	require.NoError(t, err)
	srv.Stop()

	passes := 0
	for deadline := time.Now().Add(waitLong); passes < 4; {
		require.True(t, time.Now().Before(deadline), "only %d sweep passes found the task", passes)
		res, err := d.Sweep(ctx, SweepOptions{})
		require.NoError(t, err)
		if res.Found == 0 {
			time.Sleep(10 * time.Millisecond) // rescheduled a moment ahead
			continue
		}
		passes++
		require.Equal(t, 1, res.NotNow, "pass %d: %s", passes, res)
		require.Zero(t, res.Retried+res.Failed, "pass %d: %s", passes, res)
	}
	tk := b.task(t, "order-timeout-DOWN-1")
	require.Equal(t, StatusPending, tk.Status)
	require.Zero(t, tk.RetryCount, "no retry spent on the outage")
	require.Contains(t, tk.LastError, "not now")
	st, _ := b.orderStatus(t, "DOWN-1")
	require.Zero(t, st, "still open")

	srv.Start()
	require.Eventually(t, func() bool {
		res, err := d.Sweep(ctx, SweepOptions{})
		require.NoError(t, err)
		return res.Done == 1
	}, waitLong, 20*time.Millisecond)
	tk = b.task(t, "order-timeout-DOWN-1")
	require.Equal(t, StatusDone, tk.Status)
	require.Zero(t, tk.RetryCount)
	st, logs := b.orderStatus(t, "DOWN-1")
	require.Equal(t, 2, st, "closed once Redis is back")
	require.Equal(t, 1, logs)
}

// overlapRecorder is a slow handler that notes every run of a task and
// whether two runs of one task overlapped.
type overlapRecorder struct {
	mu      sync.Mutex
	runs    map[string]int
	running map[string]bool
	overlap []string
	hold    time.Duration
}

func (r *overlapRecorder) handle(ctx context.Context, t *Task) error {
	r.mu.Lock()
	r.runs[t.BizUUID]++
	if r.running[t.BizUUID] {
		r.overlap = append(r.overlap, t.BizUUID)
	}
	r.running[t.BizUUID] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running[t.BizUUID] = false
		r.mu.Unlock()
	}()
	select {
	case <-time.After(r.hold):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A sweep claims only what its workers start at once, so a task waiting
// for a worker is not RUNNING, and another dispatcher's recovery never
// takes a task queued or running on the first: each runs once, no retry
// spent.
func TestSecondDispatcherNeverRunsQueuedTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &overlapRecorder{runs: map[string]int{}, running: map[string]bool{}, hold: 1200 * time.Millisecond}
	mk := func(db *sqlx.DB) *Dispatcher {
		cfg := b.fastConfig(map[string]HandlerFunc{"slow": rec.handle})
		cfg.db = db
		cfg.Workers, cfg.BatchSize = 1, 3
		cfg.RunningTimeout, cfg.HandlerTimeout = 2*time.Second, 1500*time.Millisecond
		return newDispatcher(t, cfg)
	}
	db2, err := sqlx.Open("mysql", b.db.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { db2.Close() })
	first, second := mk(b.db.DB), mk(db2)
	ctx := context.Background()
	for i := range 3 {
		_, _, err := first.Client().Register(ctx, Registration{BizUUID: bizN("q", i), Handler: "slow"})
		require.NoError(t, err)
	}

	var firstRes SweepResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		firstRes, err = first.Sweep(ctx, SweepOptions{})
	}()
	var recovered int
	for swept := false; !swept; {
		select {
		case <-done:
			swept = true
		case <-time.After(100 * time.Millisecond):
		}
		res, err := second.Sweep(ctx, SweepOptions{})
		require.NoError(t, err)
		recovered += res.Recovered
	}
	require.NoError(t, err)
	require.Equal(t, 3, b.countStatus(t, StatusDone), "first %s", firstRes)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := range 3 {
		biz := bizN("q", i)
		require.Equal(t, 1, rec.runs[biz], "%s ran once", biz)
		require.Zero(t, b.task(t, biz).RetryCount, "%s: no retry spent", biz)
	}
	require.Empty(t, rec.overlap)
	require.Zero(t, recovered, "nothing recovered while its runner was alive")
}

// A claim whose read-back fails (its connection killed between the UPDATE
// and the SELECT) is given back at once: the task runs soon after, with no
// retry spent, instead of waiting RUNNING for recovery.
func TestClaimReadBackFailureReleasesClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"rec": rec.handle}))
	var once sync.Once
	killed := make(chan int64, 1)
	d.afterClaim = func(ctx context.Context, conn *sqlx.Conn) {
		// On the poller's goroutine: report, never FailNow.
		once.Do(func() {
			var id int64
			if err := conn.GetContext(ctx, &id, `SELECT CONNECTION_ID()`); err != nil {
				t.Error(err)
			}
			if _, err := b.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
				t.Error(err)
			}
			for range 1000 { // until the server has let it go
				var n int
				if err := b.db.Get(&n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id); err != nil || n == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			killed <- id
		})
	}
	start(t, d)
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "readback", Handler: "rec"})
	require.NoError(t, err)
	<-killed
	tk := b.waitStatus(t, "readback", StatusDone)
	require.Zero(t, tk.RetryCount, "no retry spent")
	require.Equal(t, 1, rec.count("readback"))
	require.Zero(t, d.Counters().Recovered)
	require.Contains(t, b.logBuf.String(), "the claim was given back")
}

// "Not now" reschedules without spending a retry only within NotNowMaxAge
// of the execute time; past it, the attempt is a failure with that reason.
func TestNotNowPastMaxAgeCountsAsFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	tries := map[string]int{}
	cfg := b.fastConfig(map[string]HandlerFunc{"busy": func(ctx context.Context, tk *Task) error {
		mu.Lock()
		tries[tk.BizUUID]++
		mu.Unlock()
		return NotNow(errors.New("someone else holds it"))
	}})
	cfg.NotNowBackoff, cfg.NotNowBackoffMax, cfg.NotNowMaxAge = 50*time.Millisecond, 100*time.Millisecond, time.Hour
	d := newDispatcher(t, cfg)
	start(t, d)
	ctx := context.Background()
	_, _, err := d.Client().Register(ctx, Registration{BizUUID: "fresh", Handler: "busy"})
	require.NoError(t, err)
	_, _, err = d.Client().Register(ctx, Registration{BizUUID: "old", Handler: "busy", MaxRetry: 1,
		ExecuteTime: time.Now().Add(-2 * time.Hour)})
	require.NoError(t, err)

	old := b.waitStatus(t, "old", StatusFailed)
	require.Equal(t, 2, old.RetryCount)
	require.Contains(t, old.LastError, "notNowMaxAge")
	waitCounters(t, d, func(c Counters) bool { return c.NotNow >= 3 })
	fresh := b.task(t, "fresh")
	require.NotEqual(t, StatusFailed, fresh.Status)
	require.Zero(t, fresh.RetryCount)
	require.Contains(t, fresh.LastError, "someone else holds it")
}

// The not-now waits double with the task's age, up to the maximum.
func TestNotNowWaitDoubles(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{NotNowBackoff: time.Second, NotNowBackoffMax: 30 * time.Second}}
	for _, tc := range []struct{ age, step time.Duration }{
		{0, time.Second}, {1500 * time.Millisecond, time.Second}, {2 * time.Second, 2 * time.Second},
		{7 * time.Second, 4 * time.Second}, {20 * time.Second, 16 * time.Second}, {time.Hour, 30 * time.Second},
	} {
		for range 20 {
			w := d.notNowWait(tc.age)
			require.GreaterOrEqual(t, w, tc.step/2, "age %s", tc.age)
			require.LessOrEqual(t, w, tc.step, "age %s", tc.age)
		}
	}
}

// Timeouts that let an attempt outlive its task's RUNNING limit are
// refused, with the values that would do.
func TestTimeoutsAllowingDoubleRunRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.fastConfig(nil)
	cfg.RunningTimeout, cfg.HandlerTimeout, cfg.HandlerGrace = 120*time.Second, 60*time.Second, 50*time.Second
	_, err := cfg.build()
	var te *TimeoutsError
	require.ErrorAs(t, err, &te)
	require.Contains(t, err.Error(), "raise RunningTimeout to at least 2m3s or lower HandlerTimeout to at most 58s")
	cfg.RunningTimeout = te.MinRunningTimeout
	_, err = cfg.build()
	require.NoError(t, err)
	cfg.RunningTimeout, cfg.HandlerTimeout = 120*time.Second, te.MaxHandlerTimeout
	_, err = cfg.build()
	require.NoError(t, err)
}
