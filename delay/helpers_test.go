package delay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
)

// TestRedisRestartedEmptyTasksStillRun stops its Redis on purpose.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

const waitLong = delaytest.WaitLong

// testBundle is one test's database, Redis prefix and log.
type testBundle struct {
	db     *dbtest.DB
	rdb    *redis.Client
	prefix string
	logBuf *syncbuf.Buffer
	log    *slog.Logger
}

// logLines returns the JSON log records written to s.
func logLines(t *testing.T, s *syncbuf.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range bytes.Split([]byte(s.String()), []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		out = append(out, m)
	}
	return out
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	buf := &syncbuf.Buffer{}
	return &testBundle{
		db: db, rdb: rdb, prefix: prefix, logBuf: buf,
		log: slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// testConfig is a dispatcher's Config with the database and Redis it is
// built on.
type testConfig struct {
	Config
	db  *sqlx.DB
	rdb redis.UniversalClient
}

// fastConfig has timings small enough for tests, on the test's database
// and Redis.
func (b *testBundle) fastConfig(handlers map[string]HandlerFunc) testConfig {
	return testConfig{db: b.db.DB, rdb: b.rdb, Config: Config{
		KeyPrefix: b.prefix, Handlers: handlers, Logger: b.log,
		RunningTimeout: 5 * time.Second, HandlerTimeout: 2 * time.Second,
		ReconcileInterval: time.Hour, PollInterval: 20 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, SweepGrace: time.Millisecond,
		Workers: 8,
	}}
}

// build is NewDispatcher on cfg.
func (cfg testConfig) build() (*Dispatcher, error) { return NewDispatcher(cfg.db, cfg.rdb, cfg.Config) }

func newDispatcher(t *testing.T, cfg testConfig) *Dispatcher {
	t.Helper()
	d, err := cfg.build()
	require.NoError(t, err)
	return d
}

// start starts d and stops it when the test ends.
func start(t *testing.T, d *Dispatcher) { t.Helper(); delaytest.Start(t, d) }

// recorder is a handler that counts runs per bizUuid and records start times.
type recorder struct {
	mu     sync.Mutex
	runs   map[string]int
	starts map[string][]time.Time
	traces map[string]string
	fn     func(ctx context.Context, t *Task, n int) error // optional behaviour by run number (1-based)
}

func newRecorder() *recorder {
	return &recorder{runs: map[string]int{}, starts: map[string][]time.Time{}, traces: map[string]string{}}
}

func (r *recorder) handle(ctx context.Context, t *Task) error {
	r.mu.Lock()
	r.runs[t.BizUUID]++
	n := r.runs[t.BizUUID]
	r.starts[t.BizUUID] = append(r.starts[t.BizUUID], time.Now())
	r.traces[t.BizUUID] = TraceID(ctx)
	r.mu.Unlock()
	if r.fn != nil {
		return r.fn(ctx, t, n)
	}
	return nil
}

func (r *recorder) count(biz string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[biz]
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.runs {
		n += v
	}
	return n
}

func (r *recorder) startTimes(biz string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.starts[biz]...)
}

// task reads a task straight from the table.
func (b *testBundle) task(t *testing.T, biz string) *Task {
	t.Helper()
	tk, err := store{}.get(context.Background(), b.db, biz, false)
	require.NoError(t, err)
	return tk
}

// waitStatus waits until the task has the status want (a final one:
// DONE, FAILED) and reads it.
func (b *testBundle) waitStatus(t *testing.T, biz string, want Status) *Task {
	t.Helper()
	delaytest.WaitStatus(t, b.db, biz, string(want))
	return b.task(t, biz)
}

func (b *testBundle) countStatus(t *testing.T, st Status) int {
	t.Helper()
	return delaytest.CountStatus(t, b.db, string(st))
}

// ageTask moves a task's updated_at back, as if time had passed.
func (b *testBundle) ageTask(t *testing.T, biz string, d time.Duration) {
	t.Helper()
	delaytest.AgeTask(t, b.db, biz, d)
}

func bizN(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// waitCounters waits until cond holds for d's counters (they are updated
// just after the row, so a test that saw the row may be a moment early).
func waitCounters(t *testing.T, d *Dispatcher, cond func(c Counters) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(d.Counters()) }, waitLong, 5*time.Millisecond, "counters: %+v", d.Counters())
}

// onOwnConnections is cfg with a database handle and a Redis client of its
// own, as a second executor process would have.
func (b *testBundle) onOwnConnections(t *testing.T, cfg testConfig) testConfig {
	t.Helper()
	db2, err := sqlx.Open("mysql", b.db.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { db2.Close() })
	rdb2 := redis.NewClient(&redis.Options{Addr: redistest.Addr()})
	t.Cleanup(func() { rdb2.Close() })
	cfg.db, cfg.rdb = db2, rdb2
	return cfg
}

// sweepRace has d1 and d2 sweep five times each while the tasks race-0 to
// race-(n-1) fall due, and requires every one of them done and run exactly
// once (runs counts a task's runs), by one of the two, none lost.
func (b *testBundle) sweepRace(t *testing.T, d1, d2 *Dispatcher, n int, runs func(biz string) int) {
	t.Helper()
	ctx := context.Background()
	var sweeps sync.WaitGroup
	for i := range 2 {
		sweeps.Go(func() {
			for range 5 {
				if _, err := []*Dispatcher{d1, d2}[i].Sweep(ctx, SweepOptions{}); err != nil {
					t.Error(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, waitLong, 20*time.Millisecond)
	sweeps.Wait()
	for i := range n {
		require.Equal(t, 1, runs(bizN("race", i)), "task %d", i)
	}
	require.Eventually(t, func() bool { return d1.Counters().Done+d2.Counters().Done == int64(n) }, waitLong, 5*time.Millisecond)
	require.Zero(t, d1.Counters().Lost+d2.Counters().Lost)
}
