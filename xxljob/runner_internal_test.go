package xxljob

import (
	"context"
	"testing"
	"time"
)

// A job thread idle past its timeout stops with the reason of the admin
// generation: "excutor idel times over limit." up to 2.4.x (the 2.x
// dialect), "excutor idle times over limit." from 2.5.0 on.
func TestIdleStopReasonPerDialect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    dialect
		want string
	}{
		{dialect2x, "excutor idel times over limit."},
		{dialectUnknown, "excutor idle times over limit."},
		{dialect33, "excutor idle times over limit."},
		{dialect34, "excutor idle times over limit."},
		{dialectMain, "excutor idle times over limit."},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			t.Parallel()
			r := newRunner()
			r.idleTimeout = 10 * time.Millisecond
			r.execFunc = func(context.Context, *jobThread, triggerParam) {}
			r.reportFunc = func([]callbackParam) {}
			r.handlers["h"] = HandlerFunc(func(context.Context, *Request) error { return nil })
			r.start(t.Context())
			bean := glueTypeBean
			if rt := r.trigger(triggerParam{JobID: 7, ExecutorHandler: "h", LogID: 1, GlueType: &bean}, tc.d); rt.Code != CodeSuccess {
				t.Fatalf("trigger refused: %+v", rt)
			}
			r.mu.Lock()
			th := r.threads[7]
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if err := r.live.wait(ctx); err != nil {
				t.Fatalf("the idle job thread did not exit: %v", err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if th.stopReason != tc.want {
				t.Fatalf("stop reason %q, want %q", th.stopReason, tc.want)
			}
		})
	}
}
