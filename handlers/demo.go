package handlers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/xxljob"
)

// DemoJob is the built-in handler for trying an installation from the
// console: its param is a whole number of seconds to run (empty = 0); it logs
// one line per second and honours cancellation (kill, timeout). The param
// `fail` makes it fail with an error, `panic` makes it panic.
const DemoJob = "demoJob"

// maxDemoSeconds keeps a mistyped param from holding a job thread for days.
const maxDemoSeconds = 24 * 3600

// demoParamText quotes a refused param, its first 40 characters when it
// is longer: the refusal is the run's one-line result, and a 100 KB param
// was repeated in it whole.
func demoParamText(p string) string {
	if len(p) <= 40 {
		return strconv.Quote(p)
	}
	return fmt.Sprintf("%.40q… (%d bytes)", p, len(p))
}

// Demo returns the demoJob handler.
func Demo() xxljob.Handler {
	return xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		p := strings.TrimSpace(req.Param)
		switch p {
		case "fail":
			return errors.New("demoJob failed on purpose (param fail)")
		case "panic":
			panic("demoJob panicked on purpose (param panic)")
		}
		secs := 0
		if p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n > maxDemoSeconds {
				return fmt.Errorf("demoJob param %s: want a whole number of seconds from 0 to %d, or fail, or panic", demoParamText(p), maxDemoSeconds)
			}
			secs = n
		}
		req.Logf("demoJob starts: %d second(s), shard %d/%d", secs, req.ShardIndex, req.ShardTotal)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 1; i <= secs; i++ {
			select {
			case <-ctx.Done():
				req.Logf("demoJob stopped after %d second(s): %v", i-1, context.Cause(ctx))
				return context.Cause(ctx)
			case <-tick.C:
				req.Logf("demoJob second %d of %d", i, secs)
			}
		}
		req.SetResult(fmt.Sprintf("demoJob ran %d second(s)", secs))
		return nil
	})
}
