package delay

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type attempt struct {
	handler, result string
	late, took      time.Duration
}

type attemptRecorder struct {
	mu  sync.Mutex
	got []attempt
}

func (r *attemptRecorder) TaskAttempted(handler, result string, late, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, attempt{handler, result, late, took})
}

func (r *attemptRecorder) all() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attempt(nil), r.got...)
}

// Every attempt reaches the observer with its result and a small, non-negative
// lateness measured against the database clock.
func TestObserverSeesEachAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newRecorder()
	h.fn = func(_ context.Context, _ *Task, n int) error {
		if n == 1 {
			return fmt.Errorf("attempt %d fails", n)
		}
		return nil
	}
	obs := &attemptRecorder{}
	cfg := b.fastConfig(map[string]HandlerFunc{"obs": h.handle})
	cfg.Observer = obs
	d := newDispatcher(t, cfg)
	start(t, d)
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "obs-1", Handler: "obs", Delay: 200 * time.Millisecond})
	require.NoError(t, err)
	b.waitStatus(t, "obs-1", StatusDone)
	require.Eventually(t, func() bool { return len(obs.all()) == 2 }, waitLong, 5*time.Millisecond)

	got := obs.all()
	require.Equal(t, "obs", got[0].handler)
	require.Equal(t, AttemptRetry, got[0].result)
	require.Equal(t, AttemptDone, got[1].result)
	for _, a := range got {
		// The dispatcher never starts early (the claim checks due in SQL);
		// the estimate of the database clock is good to a few ms.
		require.Greater(t, a.late, -50*time.Millisecond, "%+v", a)
		require.Less(t, a.late, 2*time.Second, "%+v", a)
		require.Positive(t, a.took)
	}
}
