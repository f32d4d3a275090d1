package xxljob_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// A handler's context names its run, so code below the handler can tag its
// process-log lines and metrics with it; other contexts name none.
func TestRunFromContext(t *testing.T) {
	t.Parallel()
	got := make(chan xxljob.RunRef, 1)
	b := setup(t, opts{handlers: map[string]xxljob.Handler{
		"whoAmI": xxljob.HandlerFunc(func(ctx context.Context, _ *xxljob.Request) error {
			ctx, cancel := context.WithCancel(ctx) // derived contexts keep it
			defer cancel()
			r, _ := xxljob.RunFromContext(ctx) // zero if absent
			got <- r
			return nil
		}),
	}})
	p := xxljobtest.Trigger(42, "whoAmI", nextLogID())
	b.run(t, p)
	require.Equal(t, 200, b.callback(t, p.LogID).HandleCode)
	require.Equal(t, xxljob.RunRef{JobID: 42, LogID: p.LogID, Handler: "whoAmI"}, <-got)
	require.Zero(t, b.exec.CallbackQueueLen(), "the result was sent")

	_, ok := xxljob.RunFromContext(t.Context())
	require.False(t, ok)
}
