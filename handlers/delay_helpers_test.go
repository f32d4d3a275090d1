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
	"github.com/orderjob/executor/internal/delaytest"
	"github.com/orderjob/executor/internal/redistest"
)

// waitLong bounds every wait for a dispatcher to act.
const waitLong = delaytest.WaitLong

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
func start(t *testing.T, d *delay.Dispatcher) { t.Helper(); delaytest.Start(t, d) }

func (b *testBundle) task(t *testing.T, biz string) *delay.Task {
	t.Helper()
	tk, err := b.tasks.Get(context.Background(), biz)
	require.NoError(t, err)
	return tk
}

// waitStatus waits until the task has the status want (a final one:
// DONE, FAILED) and reads it.
func (b *testBundle) waitStatus(t *testing.T, biz string, want delay.Status) *delay.Task {
	t.Helper()
	delaytest.WaitStatus(t, b.db, biz, string(want))
	return b.task(t, biz)
}

// ageTask moves the task's updated_at back by d, as if d had passed.
func (b *testBundle) ageTask(t *testing.T, biz string, d time.Duration) {
	t.Helper()
	delaytest.AgeTask(t, b.db, biz, d)
}

// waitCounters waits until cond holds for d's counters (they are updated
// just after the row, so a test that saw the row may be a moment early).
func waitCounters(t *testing.T, d *delay.Dispatcher, cond func(c delay.Counters) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(d.Counters()) }, waitLong, 5*time.Millisecond, "counters: %+v", d.Counters())
}

func bizN(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
