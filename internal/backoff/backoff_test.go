package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	t.Parallel()
	e := Exponential{Base: time.Second, Max: 10 * time.Minute}
	for _, c := range []struct {
		n    int
		want time.Duration
	}{
		{-3, time.Second}, {0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{10, 512 * time.Second}, {11, 10 * time.Minute}, {1000, 10 * time.Minute},
	} {
		if got := e.Step(c.n); got != c.want {
			t.Errorf("Step(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestStepWithoutCapDoesNotOverflow(t *testing.T) {
	t.Parallel()
	e := Exponential{Base: 100 * time.Millisecond}
	if got, want := e.Step(4), 800*time.Millisecond; got != want {
		t.Fatalf("Step(4) = %v, want %v", got, want)
	}
	prev := time.Duration(0)
	for n := 1; n < 200; n++ {
		d := e.Step(n)
		if d < prev || d <= 0 {
			t.Fatalf("Step(%d) = %v after %v: overflowed", n, d, prev)
		}
		prev = d
	}
	if prev != time.Duration(1<<63-1) {
		t.Fatalf("Step(199) = %v, want the largest duration", prev)
	}
}

func TestDelayJitter(t *testing.T) {
	t.Parallel()
	exact := Exponential{Base: time.Second, Max: time.Minute}
	if got := exact.Delay(3); got != 4*time.Second {
		t.Fatalf("NoJitter Delay(3) = %v, want 4s", got)
	}
	e := Exponential{Base: time.Second, Max: time.Minute, Jitter: EqualJitter}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := e.Delay(3)
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("EqualJitter Delay(3) = %v, want within [2s, 4s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("EqualJitter gave only %d distinct delays in 1000 draws", len(seen))
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e  Exponential
		ok bool
	}{
		{Exponential{Base: time.Second}, true},
		{Exponential{Base: time.Second, Max: time.Second}, true},
		{Exponential{}, false},
		{Exponential{Base: -time.Second}, false},
		{Exponential{Base: time.Minute, Max: time.Second}, false},
		{Exponential{Base: time.Second, Jitter: 7}, false},
	} {
		if err := c.e.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", c.e, err, c.ok)
		}
	}
}

var errStop = errors.New("stopped by the test")

func TestWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errStop)
	start := time.Now()
	err := Exponential{Base: time.Hour}.Wait(ctx, 1)
	if time.Since(start) > time.Second {
		t.Fatal("Wait did not return when its context was done")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errStop) {
		t.Fatalf("Wait = %v, want context.Canceled joined with the cause", err)
	}
	if err := (Exponential{Base: time.Millisecond}).Wait(context.Background(), 1); err != nil {
		t.Fatalf("Wait = %v after its delay, want nil", err)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	e := Exponential{Base: time.Millisecond, Max: 2 * time.Millisecond}
	fail := errors.New("failed")

	var calls []int
	err := Retry(context.Background(), e, 3, func(_ context.Context, n int) (bool, error) {
		calls = append(calls, n)
		return true, fail
	})
	if !errors.Is(err, fail) || len(calls) != 3 || calls[2] != 3 {
		t.Fatalf("Retry = %v after attempts %v, want the last error after 3", err, calls)
	}

	calls = nil
	err = Retry(context.Background(), e, 5, func(_ context.Context, n int) (bool, error) {
		calls = append(calls, n)
		if n == 2 {
			return false, nil
		}
		return true, fail
	})
	if err != nil || len(calls) != 2 {
		t.Fatalf("Retry = %v after %v, want success at the 2nd attempt", err, calls)
	}

	calls = nil
	err = Retry(context.Background(), e, 5, func(_ context.Context, n int) (bool, error) {
		calls = append(calls, n)
		return false, fail
	})
	if !errors.Is(err, fail) || len(calls) != 1 {
		t.Fatalf("Retry = %v after %v, want no retry of a permanent failure", err, calls)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	err = Retry(ctx, Exponential{Base: time.Hour}, 5, func(_ context.Context, n int) (bool, error) {
		cancel(errStop)
		return true, fail
	})
	if !errors.Is(err, fail) || !errors.Is(err, errStop) {
		t.Fatalf("Retry = %v, want the last error joined with the context's cause", err)
	}
}
