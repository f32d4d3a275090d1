package orderlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's own log lines (dial failures in the Redis-down
// tests are expected).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	// After a failed dial (the tests that stop a private Redis), go-redis
	// redials in a goroutine that sleeps a second between tries and only
	// notices its pool was closed when it wakes.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
