package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// waitLong bounds every wait for a dispatcher to act.
const waitLong = 15 * time.Second

// testBundle is what the delayed-task tests need: a fresh database, the
// shared Redis with a key prefix of the test's own, and a client to read
// tasks with.
type testBundle struct {
	db     *dbtest.DB
	rdb    *redis.Client
	prefix string
	tasks  *delay.Client
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{db: dbtest.New(t)}
	b.rdb, b.prefix = redistest.Client(t)
	var err error
	b.tasks, err = delay.NewClient(b.db.DB, b.rdb, delay.ClientConfig{})
	require.NoError(t, err)
	return b
}

// testConfig is a dispatcher's config with the database and Redis it is
// built on, so tests can adjust either before building.
type testConfig struct {
	delay.Config
	db  *sqlx.DB
	rdb redis.UniversalClient
}

// fastConfig has timings small enough for tests, on the test's database
// and Redis.
func (b *testBundle) fastConfig(handlers map[string]delay.HandlerFunc) testConfig {
	return testConfig{db: b.db.DB, rdb: b.rdb, Config: delay.Config{
		KeyPrefix: b.prefix, Handlers: handlers, Logger: slog.New(slog.DiscardHandler),
		RunningTimeout: 5 * time.Second, HandlerTimeout: 2 * time.Second,
		ReconcileInterval: time.Hour, PollInterval: 20 * time.Millisecond,
		BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, SweepGrace: time.Millisecond,
		Workers: 8,
	}}
}

func newDispatcher(t *testing.T, cfg testConfig) *delay.Dispatcher {
	t.Helper()
	d, err := delay.NewDispatcher(cfg.db, cfg.rdb, cfg.Config)
	require.NoError(t, err)
	return d
}

// start starts d and stops it when the test ends.
func start(t *testing.T, d *delay.Dispatcher) {
	t.Helper()
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, d.Stop(ctx))
	})
}

func (b *testBundle) task(t *testing.T, biz string) *delay.Task {
	t.Helper()
	tk, err := b.tasks.Get(context.Background(), biz)
	require.NoError(t, err)
	return tk
}

func (b *testBundle) waitStatus(t *testing.T, biz string, want delay.Status) *delay.Task {
	t.Helper()
	var last *delay.Task
	require.Eventually(t, func() bool {
		last = b.task(t, biz)
		return last.Status == want
	}, waitLong, 10*time.Millisecond, "task %s never reached %s", biz, want)
	return last
}

// ageTask moves the task's updated_at back by d, as if d had passed.
func (b *testBundle) ageTask(t *testing.T, biz string, d time.Duration) {
	t.Helper()
	_, err := b.db.Exec(`UPDATE job_delay_task SET updated_at = updated_at - INTERVAL ? MICROSECOND WHERE biz_uuid = ?`,
		d.Microseconds(), biz)
	require.NoError(t, err)
}

// waitCounters waits until cond holds for d's counters (they are updated
// just after the row, so a test that saw the row may be a moment early).
func waitCounters(t *testing.T, d *delay.Dispatcher, cond func(c delay.Counters) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(d.Counters()) }, waitLong, 5*time.Millisecond, "counters: %+v", d.Counters())
}

func bizN(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
