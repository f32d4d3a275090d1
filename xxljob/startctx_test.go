package xxljob_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

type startCtxKey struct{}

// Start's context bounds the start-up only: cancelled once Start has
// returned, the executor still registers, serves and runs triggers, and
// runs see its values but not its cancellation; only Shutdown ends it.
func TestExecutorOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), startCtxKey{}, "from start"))
	b := setup(t, opts{startCtx: ctx, handlers: map[string]xxljob.Handler{
		"ctx": xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
			select { // long enough for a cancellation to arrive, were there one
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(100 * time.Millisecond):
			}
			req.SetResult(fmt.Sprint(ctx.Value(startCtxKey{})))
			return nil
		}),
	}})
	cancel()
	_, err := b.admin.WaitRegistrations(2, waitLong)
	require.NoError(t, err, "the heartbeat goes on")
	p := xxljobtest.Trigger(1, "ctx", nextLogID())
	b.run(t, p)
	cb := b.callback(t, p.LogID)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.Equal(t, "from start", cb.HandleMsg, "the run sees Start's values")
}

// A Start whose context is already over fails and leaves nothing to shut
// down.
func TestExecutorStartWithCancelledContext(t *testing.T) {
	t.Parallel()
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"}, AppName: "cancelled",
		Address: "http://127.0.0.1:9999/", ListenAddr: "127.0.0.1:0", LogPath: t.TempDir()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, e.Start(ctx), context.Canceled)
	require.Nil(t, e.Addr())
	require.NoError(t, e.Shutdown(context.Background()))
}

// Stop is Shutdown: before Start it ends the executor (a later Start
// fails), and on a running one it drains once, later calls returning the
// first call's result.
func TestExecutorStopIsShutdown(t *testing.T) {
	t.Parallel()
	cfg := xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"}, AppName: "stop",
		Address: "http://127.0.0.1:9999/", ListenAddr: "127.0.0.1:0", LogPath: t.TempDir()}
	e, err := xxljob.New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Stop(context.Background()), "before Start")
	require.NoError(t, e.Shutdown(context.Background()), "and again")
	require.Error(t, e.Start(context.Background()), "a Start after Stop fails")

	cfg.LogPath = t.TempDir()
	e, err = xxljob.New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	require.NotNil(t, e.Addr())
	require.NoError(t, e.Stop(context.Background()))
	require.NoError(t, e.Shutdown(context.Background()), "a second stop waits for the first")
	require.NoError(t, e.Stop(context.Background()))
}
