package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/rabbit"
	"github.com/orderjob/executor/internal/rabbittest"
)

// rabbitSetup is setup with a RabbitMQ name prefix of the test's own.
func rabbitSetup(t *testing.T) (*testBundle, string) {
	t.Helper()
	return setup(t), rabbittest.Prefix(t)
}

// rabbitTimer starts a RabbitMQ timer under prefix on db and stops it when
// the test ends (after the dispatchers, which are started later).
func (b *testBundle) rabbitTimer(t *testing.T, db *sqlx.DB, prefix string, mod func(*RabbitMQConfig)) *RabbitMQTimer {
	t.Helper()
	cfg := RabbitMQConfig{URL: rabbittest.URL(), Prefix: prefix, Logger: b.log, Prefetch: 2000, RepublishAfter: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	rt, err := NewRabbitMQTimer(db, cfg)
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, rt.Stop(ctx))
	})
	return rt
}

// rabbitDispatcher is a started dispatcher on its own database pool and
// RabbitMQ timer (one simulated executor).
func (b *testBundle) rabbitDispatcher(t *testing.T, prefix string, handlers map[string]HandlerFunc, mod func(*Config)) (*Dispatcher, *RabbitMQTimer) {
	t.Helper()
	db, err := sqlx.Open("mysql", b.db.DSN)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	rt := b.rabbitTimer(t, db, prefix, nil)
	cfg := b.fastConfig(handlers)
	cfg.db, cfg.rdb, cfg.Timer = db, nil, rt
	if mod != nil {
		mod(&cfg.Config)
	}
	d := newDispatcher(t, cfg)
	start(t, d)
	return d, rt
}

// queueDepth is how many messages wait in a queue.
func queueDepth(t *testing.T, name string) int {
	t.Helper()
	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// The hop plan: each wait takes the largest power-of-two tier that leaves
// at least hopLead (100 ms), until less than a second (and that lead) is
// left, which is held in memory.
func TestRabbitHopPlan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wait time.Duration
		hops []time.Duration
		held time.Duration
	}{
		{0, nil, 0},
		{1500 * time.Millisecond, []time.Duration{time.Second}, 500 * time.Millisecond},
		// Round waits end on the smaller tiers, so the last hop leaves a
		// lead to land in.
		{40 * time.Second, []time.Duration{32 * time.Second, 4 * time.Second, 2 * time.Second, time.Second}, time.Second},
		{3 * time.Hour, []time.Duration{8192 * time.Second, 2048 * time.Second, 512 * time.Second, 32 * time.Second,
			8 * time.Second, 4 * time.Second, 2 * time.Second, time.Second}, time.Second},
		{40*time.Second + 300*time.Millisecond, []time.Duration{32 * time.Second, 8 * time.Second}, 300 * time.Millisecond},
		{1050 * time.Millisecond, nil, 1050 * time.Millisecond},
		{30*time.Minute - 1500*time.Millisecond, []time.Duration{1024 * time.Second, 512 * time.Second, 256 * time.Second, 4 * time.Second, 2 * time.Second}, 500 * time.Millisecond},
		{-time.Second, nil, 0}, // overdue: straight to the ready queue
	} {
		hops, held := rabbitPlan(c.wait)
		require.Equal(t, c.hops, hops, "hops of %s", c.wait)
		require.Equal(t, c.held, held, "held of %s", c.wait)
	}
	// Every tier is 2^i seconds, up to 18h; beyond, a hop per 65536s.
	hops, _ := rabbitPlan(48*time.Hour + 500*time.Millisecond)
	require.Equal(t, []time.Duration{65536 * time.Second, 65536 * time.Second, 32768 * time.Second, 8192 * time.Second,
		512 * time.Second, 256 * time.Second}, hops)
}

// Against the broker: a task due now and one due in 1.5s run on time
// (the second after one hop through the 1s tier), and the first message of
// tasks due in 40s and 3h waits in the 32s and 8192s tiers, with the
// payload nowhere in it.
func TestRabbitTasksHopAndRunOnTime(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	ctx := context.Background()
	names := rabbitNames{prefix: prefix}

	_, _, err := d.Client().Register(ctx, Registration{BizUUID: "now", Handler: "rec", Payload: map[string]string{"secret": "p4yload"}})
	require.NoError(t, err)
	soon, _, err := d.Client().Register(ctx, Registration{BizUUID: "soon", Handler: "rec", Delay: 1500 * time.Millisecond})
	require.NoError(t, err)
	_, _, err = d.Client().Register(ctx, Registration{BizUUID: "forty", Handler: "rec", Delay: 40 * time.Second, Payload: map[string]string{"secret": "p4yload"}})
	require.NoError(t, err)
	_, _, err = d.Client().Register(ctx, Registration{BizUUID: "three-hours", Handler: "rec", Delay: 3 * time.Hour})
	require.NoError(t, err)

	b.waitStatus(t, "now", StatusDone)
	b.waitStatus(t, "soon", StatusDone)
	require.Equal(t, 1, rec.count("now"))
	require.Equal(t, 1, rec.count("soon"))
	started := rec.startTimes("soon")[0]
	require.False(t, started.Before(soon.ExecuteTime.Add(-5*time.Millisecond)), "never early")
	require.Less(t, started.Sub(soon.ExecuteTime), 300*time.Millisecond, "on time after a hop")
	require.Equal(t, int64(4), rt.Stats().Published)

	require.Equal(t, 1, queueDepth(t, names.tier(32*time.Second)))
	require.Equal(t, 1, queueDepth(t, names.tier(8192*time.Second)))
	for _, tier := range rabbitTiers {
		if tier != 32*time.Second && tier != 8192*time.Second {
			require.Zero(t, queueDepth(t, names.tier(tier)), "tier %s", tier)
		}
	}
	// The message carries the id, due time and attempt, not the payload.
	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	msg, ok, err := ch.Get(names.tier(32*time.Second), false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotContains(t, string(msg.Body), "p4yload")
	m, err := decodeRabbitMessage(msg.Body)
	require.NoError(t, err)
	forty := b.task(t, "forty")
	require.Equal(t, rabbitMessage{ID: forty.ID, DueMs: forty.NextAttemptTime.UnixMilli(), Attempt: 1}, m)
	require.NoError(t, msg.Nack(false, true))

	// Published, so the reconciler leaves them alone.
	for _, biz := range []string{"forty", "three-hours"} {
		var published *time.Time
		require.NoError(t, b.db.Get(&published, `SELECT published_at FROM job_delay_task WHERE biz_uuid = ?`, biz))
		require.NotNil(t, published, biz)
	}
	n, err := d.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// A task of several hops (4s, 2s, 1s, then 0.3s held) runs once, on time.
func TestRabbitMultiHopRunsOnTime(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	tk, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "hops", Handler: "rec", Delay: 7300 * time.Millisecond})
	require.NoError(t, err)
	b.waitStatus(t, "hops", StatusDone)
	started := rec.startTimes("hops")[0]
	require.False(t, started.Before(tk.ExecuteTime.Add(-5*time.Millisecond)), "never early")
	require.Less(t, started.Sub(tk.ExecuteTime), 300*time.Millisecond)
	// Planned: 4s by the client, then 2s and 1s by the consumer. Each hop is
	// planned from the time left when the message comes back, so a
	// dead-lettering more than hopLead late in total (a loaded broker) makes
	// the consumer hold the last stretch in memory instead of taking the 1s
	// tier: one hop or two, never more.
	hops := rt.Stats().Hops
	require.True(t, hops == 1 || hops == 2, "hops by the consumer: %d, want 2 (1 when the broker dead-letters late)", hops)
	require.Equal(t, 1, rec.count("hops"))
}

// The broker closes the consumer's connection while the handler runs: the
// result is stored, the acknowledgement cannot be sent, the broker
// delivers the message again, and the claim drops it: the task ran once.
func TestRabbitConsumerKilledBeforeAckRunsOnce(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	running, closed := make(chan struct{}), make(chan struct{})
	rec.fn = func(ctx context.Context, tk *Task, n int) error {
		if n == 1 {
			running <- struct{}{}
			<-closed // the broker closed the consumer's connection meanwhile
		}
		return nil
	}
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, func(c *Config) {
		c.HandlerTimeout, c.RunningTimeout = 20*time.Second, 30*time.Second
	})
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "killed", Handler: "rec", Delay: 200 * time.Millisecond})
	require.NoError(t, err)
	<-running
	require.Equal(t, 1, rabbittest.CloseConnections(t, prefix+"consume"))
	close(closed)
	b.waitStatus(t, "killed", StatusDone)
	// Redelivered after the reconnect, dropped as a duplicate, and the
	// queue is empty again.
	require.Eventually(t, func() bool { return rt.Stats().Duplicates == 1 }, waitLong, 20*time.Millisecond, "%+v", rt.Stats())
	require.Eventually(t, func() bool { return queueDepth(t, prefix+"ready") == 0 && rt.Stats().Held == 0 }, waitLong, 50*time.Millisecond)
	require.Equal(t, 1, rec.count("killed"))
	require.GreaterOrEqual(t, rt.Stats().Reconnects, int64(1))
	require.NoError(t, rt.Check(context.Background()))
}

// The broker closes every connection while tasks are waiting in the tiers
// and in memory: the timer reconnects, declares its topology again and
// resumes consuming; every task runs once.
func TestRabbitBrokerClosesConnectionsNothingLost(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	ctx := context.Background()
	const n = 300
	for i := range n {
		// Due over 5s: some straight to memory, most through 1s..4s tiers.
		_, _, err := d.Client().Register(ctx, Registration{BizUUID: bizN("closed", i), Handler: "rec",
			Delay: time.Duration(i) * 5 * time.Second / n})
		require.NoError(t, err)
	}
	time.Sleep(time.Second)
	require.Equal(t, 2, rabbittest.CloseConnections(t, prefix), "the publishing and the consuming connection")
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, 30*time.Second, 50*time.Millisecond,
		"done %d of %d", b.countStatus(t, StatusDone), n)
	for i := range n {
		require.Equal(t, 1, rec.count(bizN("closed", i)), bizN("closed", i))
	}
	require.Eventually(t, func() bool { return rt.Check(ctx) == nil }, waitLong, 20*time.Millisecond)
	require.GreaterOrEqual(t, rt.Stats().Reconnects, int64(2))
}

// A publish that fails (the broker unreachable from the registering
// process) leaves the task in the table with published_at NULL; the
// dispatcher's reconciler publishes it, once its row is older than
// RepublishAfter, and it runs.
func TestRabbitPublishFailureLeftToReconciler(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	ctx := context.Background()

	down, err := NewRabbitMQTimer(b.db.DB, RabbitMQConfig{URL: "amqp://guest:guest@127.0.0.1:1/", Prefix: prefix, Logger: b.log})
	require.NoError(t, err)
	require.NoError(t, down.Start(ctx))
	t.Cleanup(func() { _ = down.Stop(context.Background()) })
	err = down.Check(ctx)
	require.ErrorIs(t, err, rabbit.ErrDown)
	require.ErrorContains(t, err, "127.0.0.1:1/ unreachable")

	c, err := NewClient(b.db.DB, nil, ClientConfig{Timer: down, Logger: b.log})
	require.NoError(t, err)
	tk, created, err := c.Register(ctx, Registration{BizUUID: "unpublished", Handler: "rec", Delay: 100 * time.Millisecond})
	require.NoError(t, err, "the task is durable; the timer learns of it later")
	require.True(t, created)
	require.Contains(t, b.logBuf.String(), "the reconciler will schedule it")

	time.Sleep(500 * time.Millisecond)
	require.Equal(t, StatusPending, b.task(t, "unpublished").Status, "nothing published it yet")
	n, err := d.Reconcile(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "younger than RepublishAfter: a publish may still be in flight")
	b.ageTask(t, "unpublished", 2*time.Second)
	n, err = d.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	b.waitStatus(t, "unpublished", StatusDone)
	require.Equal(t, 1, rec.count("unpublished"))
	require.Equal(t, int64(1), rt.Stats().Republished)
	require.Less(t, time.Since(tk.ExecuteTime), 5*time.Second)
}

// Every tier queue purged: the messages are gone, published_at says they
// were sent; once overdue by RepublishAfter, the reconciler publishes them
// again (the ready queue being empty) and they run.
func TestRabbitPurgedTiersReconciled(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, func(c *Config) {
		c.ReconcileInterval = 500 * time.Millisecond
	})
	ctx := context.Background()
	const n = 50
	for i := range n {
		_, _, err := d.Client().Register(ctx, Registration{BizUUID: bizN("purged", i), Handler: "rec", Delay: 5 * time.Second})
		require.NoError(t, err)
	}
	names := rabbitNames{prefix: prefix}
	require.Eventually(t, func() bool { return queueDepth(t, names.tier(4*time.Second)) == n }, waitLong, 20*time.Millisecond)
	for _, tier := range rabbitTiers {
		rabbittest.Purge(t, names.tier(tier))
	}
	require.Zero(t, queueDepth(t, names.tier(4*time.Second)))
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, 30*time.Second, 50*time.Millisecond)
	for i := range n {
		require.Equal(t, 1, rec.count(bizN("purged", i)))
	}
	// Each task was published again at least once. On a loaded machine a
	// republished message not yet claimed when RepublishAfter (1 s here)
	// has passed again is published once more: at least once, and each
	// task still runs once (above).
	require.GreaterOrEqual(t, rt.Stats().Republished, int64(n))
}

// Two executors race on the same tasks, each message published twice (as
// the reconciler may): every task runs once, and the extra messages are
// counted as duplicates.
func TestRabbitTwoExecutorsRaceRunOnce(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	handlers := map[string]HandlerFunc{"rec": rec.handle}
	d1, rt1 := b.rabbitDispatcher(t, prefix, handlers, nil)
	_, rt2 := b.rabbitDispatcher(t, prefix, handlers, nil)
	reg := b.rabbitTimer(t, b.db.DB, prefix, nil)
	c, err := NewClient(b.db.DB, nil, ClientConfig{Timer: reg, Logger: b.log, ValidateHandler: d1.ValidateHandler})
	require.NoError(t, err)
	ctx := context.Background()
	const n = 400
	var tasks []*Task
	for i := range n {
		tk, _, err := c.RegisterTx(ctx, b.db, Registration{BizUUID: bizN("race", i), Handler: "rec", Delay: time.Duration(i%20) * 100 * time.Millisecond})
		require.NoError(t, err)
		tasks = append(tasks, tk)
	}
	require.NoError(t, c.Schedule(ctx, tasks...))
	require.NoError(t, c.Schedule(ctx, tasks...), "a second message of every task")
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, 30*time.Second, 50*time.Millisecond)
	for i := range n {
		require.Equal(t, 1, rec.count(bizN("race", i)), bizN("race", i))
	}
	require.Eventually(t, func() bool { return rt1.Stats().Duplicates+rt2.Stats().Duplicates == n }, waitLong, 20*time.Millisecond,
		"%+v %+v", rt1.Stats(), rt2.Stats())
	require.Positive(t, d1.Counters().Claimed)
	require.Eventually(t, func() bool { return queueDepth(t, prefix+"ready") == 0 }, waitLong, 50*time.Millisecond)
}

// A classic queue where the timer declares a quorum queue of that name:
// the timer says so (readiness fails, with the queue and the way out),
// tasks wait in the table; once the operator deletes the queue, the timer
// declares its own, and the reconciler publishes what waited.
func TestRabbitTopologyConflict(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(prefix+"ready", true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	require.NoError(t, err)

	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	ctx := context.Background()
	err = rt.Check(ctx)
	var te *rabbit.TopologyError
	require.ErrorAs(t, err, &te)
	require.ErrorContains(t, err, prefix+"ready")
	require.ErrorContains(t, err, "x-queue-type")

	_, _, err = d.Client().Register(ctx, Registration{BizUUID: "waits", Handler: "rec"})
	require.NoError(t, err)
	_, err = d.Reconcile(ctx)
	require.ErrorAs(t, err, &te, "nothing to publish to")

	_, err = ch.QueueDelete(prefix+"ready", false, false, false)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rt.Check(ctx) == nil }, 30*time.Second, 50*time.Millisecond)
	b.ageTask(t, "waits", 2*time.Second)
	n, err := d.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	b.waitStatus(t, "waits", StatusDone)
}

// A prefix that would make names RabbitMQ refuses, and a bad URL, are
// refused up front, before anything connects.
func TestRabbitConfigRefused(t *testing.T) {
	t.Parallel()
	db := dbtest.Unconnected(t)
	for _, tc := range []struct {
		name string
		db   *sqlx.DB
		cfg  RabbitMQConfig
		want string
	}{
		{"prefix", db, RabbitMQConfig{URL: "amqp://x/", Prefix: "has space"},
			`delay: RabbitMQ prefix "has space" is not letters, digits, '.', '_', '-' (at most 200)`},
		{"scheme", db, RabbitMQConfig{URL: "http://guest:SECRET@x/"},
			"rabbitmq URL http://guest:xxxxx@x/: AMQP scheme must be either 'amqp://' or 'amqps://'"},
		{"prefetch", db, RabbitMQConfig{URL: "amqp://x/", Prefetch: 70000}, "delay: RabbitMQ prefetch 70000 is not in 1..65535"},
		{"republish", db, RabbitMQConfig{URL: "amqp://x/", RepublishAfter: time.Millisecond}, "delay: RabbitMQ RepublishAfter 1ms is below 1s"},
		{"no database", nil, RabbitMQConfig{URL: "amqp://x/"}, "delay: NewRabbitMQTimer needs a database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRabbitMQTimer(tc.db, tc.cfg)
			require.EqualError(t, err, tc.want)
			require.NotContains(t, err.Error(), "SECRET")
		})
	}
	var err error = &rabbit.TopologyError{Err: errors.New("x")}
	require.Contains(t, fmt.Sprint(err), "conflicts")
}

// An operator deletes a tier queue: the registration's message comes back
// unroutable, the task stays unpublished in the table, the timer declares
// its topology again, and the reconciler publishes the task, which runs.
func TestRabbitUnroutablePublishLeftToReconciler(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	d, rt := b.rabbitDispatcher(t, prefix, map[string]HandlerFunc{"rec": rec.handle}, nil)
	ctx := context.Background()
	names := rabbitNames{prefix: prefix}
	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDelete(names.tier(4*time.Second), false, false, false)
	require.NoError(t, err)

	_, _, err = d.Client().Register(ctx, Registration{BizUUID: "returned", Handler: "rec", Delay: 5 * time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rt.Stats().Failures == 1 }, waitLong, 10*time.Millisecond, "%+v", rt.Stats())
	var published *time.Time
	require.NoError(t, b.db.Get(&published, `SELECT published_at FROM job_delay_task WHERE biz_uuid = 'returned'`))
	require.Nil(t, published, "not confirmed: nothing recorded")
	require.Eventually(t, func() bool {
		_, err := ch.QueueDeclarePassive(names.tier(4*time.Second), true, false, false, false, nil)
		if err != nil {
			ch, _ = conn.Channel() // a passive declare of a missing queue closes the channel
		}
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the timer declared its topology again")
	require.Eventually(t, func() bool { return rt.Check(ctx) == nil }, 30*time.Second, 20*time.Millisecond)

	b.ageTask(t, "returned", 2*time.Second)
	n, err := d.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	b.waitStatus(t, "returned", StatusDone)
	require.Equal(t, 1, rec.count("returned"))
}

// Two executors' reconcilers at the same moment publish each lost task
// once: one holds the reconciler's lock, the other skips the tick.
func TestRabbitConcurrentReconcilersPublishOnce(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	rec := newRecorder()
	handlers := map[string]HandlerFunc{"rec": rec.handle}
	d1, _ := b.rabbitDispatcher(t, prefix, handlers, nil)
	d2, _ := b.rabbitDispatcher(t, prefix, handlers, nil)
	ctx := context.Background()
	const n = 300
	// Published an hour ago and due a minute ago, but no message: lost.
	c, err := NewClient(b.db.DB, nil, ClientConfig{})
	require.NoError(t, err)
	for i := range n {
		_, _, err := c.Register(ctx, Registration{BizUUID: bizN("lost", i), Handler: "rec", Delay: time.Hour})
		require.NoError(t, err)
	}
	_, err = b.db.Exec(`UPDATE job_delay_task SET next_attempt_time = UTC_TIMESTAMP(3) - INTERVAL 1 MINUTE,
		published_at = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR, updated_at = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR`)
	require.NoError(t, err)

	var total atomic.Int64
	var wg sync.WaitGroup
	for _, d := range []*Dispatcher{d1, d2, d1, d2} {
		wg.Go(func() {
			n, err := d.Reconcile(ctx)
			require.NoError(t, err)
			total.Add(n)
		})
	}
	wg.Wait()
	require.Equal(t, int64(n), total.Load())
	require.Eventually(t, func() bool { return b.countStatus(t, StatusDone) == n }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, n, rec.total())
}
