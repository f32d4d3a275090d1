package delay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// batchRecorder is a batch handler that counts runs per bizUuid and the
// size of every call, and checks each task's context.
type batchRecorder struct {
	mu       sync.Mutex
	runs     map[string]int
	sizes    []int
	inFlight *atomic.Int32 // shared with single handlers to bound concurrency
	maxSeen  *atomic.Int32
	problems []string
	fn       func(ctx context.Context, t *Task, n int) error // by run number of the task (1-based)
}

func newBatchRecorder() *batchRecorder {
	return &batchRecorder{runs: map[string]int{}, inFlight: &atomic.Int32{}, maxSeen: &atomic.Int32{}}
}

func (r *batchRecorder) enter() func() {
	n := r.inFlight.Add(1)
	for {
		m := r.maxSeen.Load()
		if n <= m || r.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { r.inFlight.Add(-1) }
}

func (r *batchRecorder) handle(ctx context.Context, tasks []*Task) []error {
	defer r.enter()()
	r.mu.Lock()
	r.sizes = append(r.sizes, len(tasks))
	batchTrace := TraceID(ctx)
	if batchTrace == "" {
		r.problems = append(r.problems, "batch context has no trace id")
	}
	if _, ok := ctx.Deadline(); !ok {
		r.problems = append(r.problems, "batch context has no deadline")
	}
	nth := make([]int, len(tasks))
	for i, t := range tasks {
		r.runs[t.BizUUID]++
		nth[i] = r.runs[t.BizUUID]
		if got := TraceID(ForTask(ctx, t)); got != t.TraceID {
			r.problems = append(r.problems, fmt.Sprintf("task %s: trace id %q in its context, want %q", t.BizUUID, got, t.TraceID))
		}
		if t.TraceID == batchTrace {
			r.problems = append(r.problems, "the batch trace id is a task's")
		}
	}
	r.mu.Unlock()
	errs := make([]error, len(tasks))
	for i, t := range tasks {
		tctx := ForTask(ctx, t)
		Logger(tctx).InfoContext(tctx, "batch handler saw task", "biz", t.BizUUID)
		if r.fn != nil {
			errs[i] = r.fn(tctx, t, nth[i])
		}
	}
	return errs
}

func (r *batchRecorder) count(biz string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[biz]
}

func (r *batchRecorder) calls() (n, largest int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sizes {
		largest = max(largest, s)
	}
	return len(r.sizes), largest
}

func (r *batchRecorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.problems)
}

func (b *testBundle) batchConfig(single map[string]HandlerFunc, batch map[string]BatchHandlerFunc) testConfig {
	cfg := b.fastConfig(single)
	cfg.BatchHandlers = batch
	return cfg
}

// registerAt registers n tasks of handler, bizUuids prefix-0.., all due at
// at, from a client of their own (no wake-up of the dispatchers).
func (b *testBundle) registerAt(t *testing.T, prefix, handler string, n int, at time.Time, maxRetry int) {
	t.Helper()
	reg, err := NewClient(b.db.DB, b.rdb, ClientConfig{KeyPrefix: b.prefix})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				_, _, err := reg.Register(context.Background(), Registration{BizUUID: bizN(prefix, i), Handler: handler,
					ExecuteTime: at, MaxRetry: maxRetry})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// A batch handler's tasks come due together and are handed over in calls of
// at most HandlerBatchSize; each task's result is recorded on its own: DONE,
// retried with backoff, or FAILED, with its own trace id on its log lines.
func TestBatchHandlerResultsPerTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newBatchRecorder()
	rec.fn = func(ctx context.Context, tk *Task, n int) error {
		switch {
		case strings.HasPrefix(tk.BizUUID, "ok-"):
			ReportOutcome(ctx, "fine")
			return nil
		case strings.HasPrefix(tk.BizUUID, "again-"):
			if n == 1 {
				return errors.New("not yet")
			}
			ReportOutcome(ctx, "fine")
			return nil
		case strings.HasPrefix(tk.BizUUID, "never-"):
			return errors.New("still broken")
		default: // "bad-"
			return Permanent(errors.New("cannot be done"))
		}
	}
	cfg := b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": rec.handle})
	cfg.HandlerBatchSize = 7
	d := newDispatcher(t, cfg)
	at := time.Now().Add(700 * time.Millisecond)
	b.registerAt(t, "ok", "bat", 30, at, 0)
	b.registerAt(t, "again", "bat", 10, at, 0)
	b.registerAt(t, "never", "bat", 5, at, 1)
	b.registerAt(t, "bad", "bat", 5, at, 0)
	start(t, d)

	for i := range 30 {
		tk := b.waitStatus(t, bizN("ok", i), StatusDone)
		require.Zero(t, tk.RetryCount)
		require.Equal(t, 1, rec.count(bizN("ok", i)))
	}
	for i := range 10 {
		tk := b.waitStatus(t, bizN("again", i), StatusDone)
		require.Equal(t, 1, tk.RetryCount)
		require.Equal(t, "not yet", tk.LastError)
		require.Equal(t, 2, rec.count(bizN("again", i)))
	}
	for i := range 5 {
		tk := b.waitStatus(t, bizN("never", i), StatusFailed)
		require.Equal(t, 2, tk.RetryCount, "first attempt and its one retry")
		require.Equal(t, "still broken", tk.LastError)
		tk = b.waitStatus(t, bizN("bad", i), StatusFailed)
		require.Equal(t, 1, tk.RetryCount, "permanent: no retry")
		require.Contains(t, tk.LastError, "cannot be done")
	}
	waitCounters(t, d, func(c Counters) bool {
		return c.Done == 40 && c.Failed == 10 && c.Retried == 15 && c.Outcomes["fine"] == 40
	})
	rec.check(t)
	calls, largest := rec.calls()
	t.Logf("%d calls, largest %d", calls, largest)
	require.LessOrEqual(t, largest, 7, "HandlerBatchSize bounds a call")
	require.Greater(t, largest, 1, "tasks due together are handed over together")
	require.Less(t, calls, 50+15, "fewer calls than attempts")

	// Every line the handler logged for a task carries that task's trace id.
	traces := map[string]string{}
	for _, l := range logLines(t, b.logBuf) {
		if l["msg"] == "batch handler saw task" {
			biz := l["biz"].(string)
			if traces[biz] == "" {
				traces[biz] = b.task(t, biz).TraceID
			}
			require.Equal(t, traces[biz], l["trace_id"], "%v", l)
		}
	}
	require.Len(t, traces, 50)
}

// A panic, a result of the wrong length and a call cut at HandlerTimeout
// fail the attempt of every task of the call; each task retries and then
// succeeds.
func TestBatchHandlerMisbehaving(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"panic", "short", "slow"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var calls atomic.Int32
			h := func(ctx context.Context, tasks []*Task) []error {
				if calls.Add(1) == 1 {
					switch how {
					case "panic":
						panic("boom")
					case "short":
						return []error{nil}
					case "slow":
						<-ctx.Done()
						errs := make([]error, len(tasks))
						for i := range errs {
							errs[i] = ctx.Err()
						}
						return errs
					}
				}
				return make([]error, len(tasks))
			}
			cfg := b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": h})
			cfg.RunningTimeout, cfg.HandlerTimeout = 2*time.Second, 300*time.Millisecond
			d := newDispatcher(t, cfg)
			b.registerAt(t, how, "bat", 4, time.Now().Add(500*time.Millisecond), 0)
			start(t, d)
			want := map[string]string{"panic": "panicked: boom", "short": "returned 1 results for", "slow": "timed out after 300ms"}[how]
			for i := range 4 {
				tk := b.waitStatus(t, bizN(how, i), StatusDone)
				if tk.RetryCount == 1 {
					require.Contains(t, tk.LastError, want)
				}
			}
			// The counters move just after the rows are written.
			require.Eventually(t, func() bool { return d.Counters().Done == 4 }, 5*time.Second, 10*time.Millisecond)
			c := d.Counters()
			require.Positive(t, c.Retried)
			require.Zero(t, c.Recovered)
		})
	}
}

// Two dispatchers with batch handlers, and sweeps on both, race for the same
// tasks: each runs exactly once.
func TestTwoDispatchersBatchEachTaskOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newBatchRecorder()
	d1 := newDispatcher(t, b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": rec.handle}))
	d2 := newDispatcher(t, b.onOwnConnections(t, b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": rec.handle})))
	start(t, d1)
	start(t, d2)

	const n = 600
	b.registerAt(t, "race", "bat", n, time.Now().Add(500*time.Millisecond), 0)
	b.sweepRace(t, d1, d2, n, rec.count)
	rec.check(t)
	calls, largest := rec.calls()
	t.Logf("%d calls for %d tasks, largest %d; dispatcher 1 ran %d, dispatcher 2 ran %d",
		calls, n, largest, d1.Counters().Done, d2.Counters().Done)
}

// Single and batch handlers share the workers: never more handler calls at
// once than Workers, single-handler tasks beyond the free slots are left
// PENDING for the next look (not held in memory), and every task runs once.
func TestBatchAndSingleHandlersShareWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newBatchRecorder()
	rec.fn = func(context.Context, *Task, int) error {
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	var mu sync.Mutex
	singles := map[string]int{}
	single := func(_ context.Context, tk *Task) error {
		defer rec.enter()()
		mu.Lock()
		singles[tk.BizUUID]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return nil
	}
	cfg := b.batchConfig(map[string]HandlerFunc{"one": single}, map[string]BatchHandlerFunc{"bat": rec.handle, "bat2": rec.handle})
	cfg.Workers, cfg.HandlerBatchSize = 3, 10
	d := newDispatcher(t, cfg)
	at := time.Now().Add(700 * time.Millisecond)
	b.registerAt(t, "s", "one", 60, at, 0)
	b.registerAt(t, "b", "bat", 100, at, 0)
	b.registerAt(t, "c", "bat2", 40, at, 0)
	start(t, d)
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == 200 }, waitLong, 20*time.Millisecond)
	mu.Lock()
	for i := range 60 {
		require.Equal(t, 1, singles[bizN("s", i)])
	}
	mu.Unlock()
	for i := range 100 {
		require.Equal(t, 1, rec.count(bizN("b", i)))
	}
	for i := range 40 {
		require.Equal(t, 1, rec.count(bizN("c", i)))
	}
	require.LessOrEqual(t, rec.maxSeen.Load(), int32(3), "at most Workers handler calls at once")
	_, largest := rec.calls()
	require.LessOrEqual(t, largest, 10)
	require.Greater(t, largest, 1)
	rec.check(t)
	// A task is DONE in the table a moment before its worker counts it.
	waitCounters(t, d, func(c Counters) bool { return c.Done == 200 })
	c := d.Counters()
	require.Zero(t, c.Lost+c.Released+c.Recovered)
}

func TestBatchHandlerConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nop := func(context.Context, []*Task) []error { return nil }
	cfg := b.batchConfig(map[string]HandlerFunc{"x": func(context.Context, *Task) error { return nil }},
		map[string]BatchHandlerFunc{"x": nop, "1bad": nop, "nil": nil})
	cfg.HandlerBatchSize = 501
	_, err := cfg.build()
	require.ErrorContains(t, err, `"x" is in both Handlers and BatchHandlers`)
	require.ErrorContains(t, err, `"1bad"`)
	require.ErrorContains(t, err, `batch handler "nil" is nil`)
	require.ErrorContains(t, err, "HandlerBatchSize 501")

	d := newDispatcher(t, b.batchConfig(map[string]HandlerFunc{"one": func(context.Context, *Task) error { return nil }},
		map[string]BatchHandlerFunc{"bat": nop}))
	require.NoError(t, d.ValidateHandler("bat"))
	require.NoError(t, d.ValidateHandler("one"))
	require.ErrorContains(t, d.ValidateHandler("other"), "known: bat, one")
	require.Equal(t, 500, d.cfg.HandlerBatchSize, "default: BatchSize")
}

// ForTask outside a batch returns the context as it is.
func TestForTaskOutsideBatch(t *testing.T) {
	t.Parallel()
	ctx := withTask(context.Background(), &taskCtx{traceID: "t1"})
	require.Equal(t, ctx, ForTask(ctx, &Task{ID: 1}))
	require.Equal(t, "t1", TraceID(ForTask(ctx, &Task{ID: 1})))
	require.Empty(t, TraceID(ForTask(context.Background(), &Task{ID: 1})))
}

// The successful tasks of a batch are recorded DONE together, but only
// those whose claim is still this run's: a task recovered and claimed
// again meanwhile is left to its new owner and counted lost.
func TestBatchDoneWritesOnlyOwnClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var stolen atomic.Int64
	h := func(_ context.Context, tasks []*Task) []error {
		if len(tasks) > 1 && stolen.CompareAndSwap(0, tasks[0].ID) {
			// Another run took the first task over (recovered and claimed it).
			_, err := b.db.Exec(`UPDATE job_delay_task SET claim_id = claim_id + 1 WHERE id = ?`, tasks[0].ID)
			if err != nil {
				panic(err)
			}
		}
		return make([]error, len(tasks))
	}
	d := newDispatcher(t, b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": h}))
	b.registerAt(t, "own", "bat", 20, time.Now().Add(500*time.Millisecond), 0)
	start(t, d)
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == 19 }, waitLong, 20*time.Millisecond)
	waitCounters(t, d, func(c Counters) bool { return c.Done == 19 && c.Lost == 1 })
	require.NotZero(t, stolen.Load())
	var st Status
	var claim int64
	require.NoError(t, b.db.QueryRow(`SELECT status, claim_id FROM job_delay_task WHERE id = ?`, stolen.Load()).Scan(&st, &claim))
	require.Equal(t, StatusRunning, st, "the new owner's claim is left alone")
	require.NotZero(t, claim)
}

// Stop cancels a batch in flight: its tasks are given back PENDING without
// spending a retry, each on its own.
func TestStopGivesBatchBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan int, 1)
	h := func(ctx context.Context, tasks []*Task) []error {
		select {
		case started <- len(tasks):
		default:
		}
		<-ctx.Done()
		errs := make([]error, len(tasks))
		for i := range errs {
			errs[i] = context.Cause(ctx)
		}
		return errs
	}
	cfg := b.batchConfig(nil, map[string]BatchHandlerFunc{"bat": h})
	cfg.Workers = 1
	d := newDispatcher(t, cfg)
	b.registerAt(t, "stop", "bat", 5, time.Now().Add(300*time.Millisecond), 0)
	require.NoError(t, d.Start(context.Background()))
	n := <-started
	stopCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, d.Stop(stopCtx), context.DeadlineExceeded)
	require.EqualValues(t, n, d.Counters().Released)
	require.Equal(t, 5, b.countStatus(t, StatusPending), "the batch given back, the rest never claimed")
	for i := range 5 {
		tk := b.task(t, bizN("stop", i))
		require.Zero(t, tk.RetryCount)
	}
}
