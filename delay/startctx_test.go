package delay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/rabbittest"
)

type startCtxKey struct{}

// stopAtEnd stops c when the test ends.
func stopAtEnd(t *testing.T, c interface{ Stop(context.Context) error }) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Stop(ctx))
	})
}

// Start's context bounds the start-up only: cancelled once Start has
// returned, the dispatcher still takes tasks, its handlers are not
// cancelled, and they see its values; only Stop ends it.
func TestDispatcherOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type seen struct {
		value   any
		ctxErr  error
		elapsed time.Duration
	}
	runs := make(chan seen, 2)
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"ctx": func(ctx context.Context, _ *Task) error {
		t0 := time.Now()
		select { // long enough for a cancellation to arrive, were there one
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		runs <- seen{ctx.Value(startCtxKey{}), ctx.Err(), time.Since(t0)}
		return nil
	}}))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), startCtxKey{}, "from start"))
	require.NoError(t, d.Start(ctx))
	cancel()
	stopAtEnd(t, d)

	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "after-cancel", Handler: "ctx", Delay: 200 * time.Millisecond})
	require.NoError(t, err)
	b.waitStatus(t, "after-cancel", StatusDone)
	got := <-runs
	require.Equal(t, "from start", got.value, "the handler runs under Start's values")
	require.NoError(t, got.ctxErr, "not under its cancellation")
	require.GreaterOrEqual(t, got.elapsed, 100*time.Millisecond)
}

// A Start whose context is already over fails and leaves nothing running.
func TestDispatcherStartWithCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := newDispatcher(t, b.fastConfig(nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, d.Start(ctx), context.Canceled)
	require.NoError(t, d.Stop(context.Background()))
}

// On the RabbitMQ timer too: with the timer's and the dispatcher's start
// contexts both cancelled, a task registered afterwards is published,
// consumed and run under the dispatcher's start values.
func TestRabbitMQTimerOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	b, prefix := rabbitSetup(t)
	tctx, cancelTimer := context.WithCancel(context.Background())
	rt, err := NewRabbitMQTimer(b.db.DB, RabbitMQConfig{URL: rabbittest.URL(), Prefix: prefix, Logger: b.log})
	require.NoError(t, err)
	require.NoError(t, rt.Start(tctx))
	cancelTimer()
	stopAtEnd(t, rt)
	values := make(chan any, 1)
	cfg := b.fastConfig(map[string]HandlerFunc{"ctx": func(ctx context.Context, _ *Task) error {
		values <- ctx.Value(startCtxKey{})
		return nil
	}})
	cfg.rdb, cfg.Timer = nil, rt
	d := newDispatcher(t, cfg)
	dctx, cancelDispatcher := context.WithCancel(context.WithValue(context.Background(), startCtxKey{}, "from start"))
	require.NoError(t, d.Start(dctx))
	cancelDispatcher()
	stopAtEnd(t, d)

	_, _, err = d.Client().Register(context.Background(), Registration{BizUUID: "rabbit-after-cancel", Handler: "ctx", Delay: 1500 * time.Millisecond})
	require.NoError(t, err)
	b.waitStatus(t, "rabbit-after-cancel", StatusDone)
	require.Equal(t, "from start", <-values)
	require.Positive(t, rt.Stats().Published, "published through the timer")
}
