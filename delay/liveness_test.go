package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
)

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
	var te *timeoutsError
	require.ErrorAs(t, err, &te)
	require.Contains(t, err.Error(), "raise RunningTimeout to at least 2m3s or lower HandlerTimeout to at most 58s")
	cfg.RunningTimeout = te.MinRunningTimeout
	_, err = cfg.build()
	require.NoError(t, err)
	cfg.RunningTimeout, cfg.HandlerTimeout = 120*time.Second, te.MaxHandlerTimeout
	_, err = cfg.build()
	require.NoError(t, err)
}
