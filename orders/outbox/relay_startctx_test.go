package outbox_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/outbox"
)

type startCtxKey struct{}

// ctxValues is a slog handler that records, for each record, the value of
// startCtxKey in the context it was written under.
type ctxValues struct {
	mu     sync.Mutex
	values []any
}

func (h *ctxValues) Enabled(context.Context, slog.Level) bool { return true }
func (h *ctxValues) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *ctxValues) WithGroup(string) slog.Handler            { return h }
func (h *ctxValues) Handle(ctx context.Context, _ slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.values = append(h.values, ctx.Value(startCtxKey{}))
	return nil
}

func (h *ctxValues) seen() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]any(nil), h.values...)
}

// Start's context bounds the start-up only: cancelled once Start has
// returned, the relay still delivers every event, under its values; only
// Stop ends it.
func TestRelayOutlivesItsStartContext(t *testing.T) {
	t.Parallel()
	b, _ := closedInOutbox(t, 20)
	inv, cpn := newReceiver(t, ""), newReceiver(t, "")
	logs := &ctxValues{}
	r := newRelay(t, b, inv, cpn, outbox.RelayConfig{PollInterval: 10 * time.Millisecond, Logger: slog.New(logs)})
	ctx, cancel := context.WithCancel(context.WithValue(b.Ctx, startCtxKey{}, "from start"))
	require.NoError(t, r.Start(ctx))
	cancel()
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	require.Eventually(t, func() bool {
		backlog, err := r.Backlog(b.Ctx)
		require.NoError(t, err)
		// The pass is logged after its deliveries are marked done.
		return backlog.Pending == 0 && len(logs.seen()) > 0
	}, 10*time.Second, 20*time.Millisecond, "the relay stopped delivering (or logging its passes) when its start context ended")
	for _, v := range logs.seen() {
		require.Equal(t, "from start", v, "the relay's lines are written under Start's values")
	}
}
