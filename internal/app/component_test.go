package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/api"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/rabbittest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/xxljob"
)

// fakeComponent records its starts and stops in a shared log and fails its
// start when told to.
type fakeComponent struct {
	name    string
	log     *[]string
	failErr error
}

func (f *fakeComponent) Start(context.Context) error {
	*f.log = append(*f.log, "start "+f.name)
	return f.failErr
}

func (f *fakeComponent) Stop(context.Context) error {
	*f.log = append(*f.log, "stop "+f.name)
	return nil
}

// When the Nth component fails to start, the ones before it are stopped in
// reverse and the start's error comes back; the failed one and those after
// it are neither started nor stopped. A Stop after that stops nothing more.
func TestComponentsFailedStartStopsTheStartedInReverse(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("component %d of 4 fails", n), func(t *testing.T) {
			t.Parallel()
			var log []string
			boom := errors.New("boom")
			cs := NewComponents(slog.New(slog.DiscardHandler))
			for i := 1; i <= 4; i++ {
				f := &fakeComponent{name: fmt.Sprint(i), log: &log}
				if i == n {
					f.failErr = boom
				}
				cs.Add(f.name, f)
			}
			require.ErrorIs(t, cs.Start(t.Context()), boom)
			var want []string
			for i := 1; i <= n; i++ {
				want = append(want, fmt.Sprint("start ", i))
			}
			for i := n - 1; i >= 1; i-- {
				want = append(want, fmt.Sprint("stop ", i))
			}
			require.Equal(t, want, log)
			require.NoError(t, cs.Stop(t.Context()))
			require.Equal(t, want, log, "nothing left to stop")
		})
	}
}

// Started in order, stopped in reverse, every one even when some fail to
// stop (their errors joined); a second Stop stops nothing.
func TestComponentsStopInReverse(t *testing.T) {
	t.Parallel()
	var log []string
	cs := NewComponents(slog.New(slog.DiscardHandler))
	errA, errC := errors.New("a"), errors.New("c")
	cs.Add("a", stopFails{&fakeComponent{name: "a", log: &log}, errA})
	cs.Add("b", &fakeComponent{name: "b", log: &log})
	cs.Add("c", stopFails{&fakeComponent{name: "c", log: &log}, errC})
	require.NoError(t, cs.Start(t.Context()))
	err := cs.Stop(t.Context())
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errC)
	require.Equal(t, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}, log)
	require.NoError(t, cs.Stop(t.Context()))
	require.Len(t, log, 6)
}

type stopFails struct {
	*fakeComponent
	err error
}

func (s stopFails) Stop(ctx context.Context) error {
	_ = s.fakeComponent.Stop(ctx)
	return s.err
}

// stress starts and stops components newComponent makes, in loops and
// concurrently (run it with -race): Stop without Start and twice, Stops
// racing each other after a Start, and Starts racing Stops, of which at
// most one Start may succeed. Every Stop must return nil: nothing here
// leaves work in flight, and none may hang.
func stress(t *testing.T, loops int, newComponent func(t *testing.T) Component) {
	t.Helper()
	stop := func(c Component) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Stop(ctx)
	}
	for range loops {
		c := newComponent(t)
		require.NoError(t, stop(c), "Stop without Start")
		require.NoError(t, stop(c), "Stop twice without Start")

		c = newComponent(t)
		require.NoError(t, c.Start(t.Context()))
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { assert.NoError(t, stop(c), "concurrent Stop") })
		}
		wg.Wait()
		require.NoError(t, stop(c), "Stop after Stop")
		require.Error(t, c.Start(t.Context()), "Start after Stop")

		c = newComponent(t)
		var started atomic.Int32
		for range 4 {
			wg.Go(func() {
				if c.Start(t.Context()) == nil {
					started.Add(1)
				}
			})
			wg.Go(func() { assert.NoError(t, stop(c), "Stop racing Start") })
		}
		wg.Wait()
		require.LessOrEqual(t, started.Load(), int32(1), "one Start at most")
		require.NoError(t, stop(c), "Stop after the race")
	}
}

func TestComponentsStress(t *testing.T) {
	t.Parallel()
	stress(t, 20, func(t *testing.T) Component {
		cs := NewComponents(slog.New(slog.DiscardHandler))
		for _, n := range []string{"a", "b"} {
			cs.Add(n, api.New(api.Config{Addr: "127.0.0.1:0"}))
		}
		return cs
	})
}

func TestAPIServerStress(t *testing.T) {
	t.Parallel()
	stress(t, 20, func(*testing.T) Component { return api.New(api.Config{Addr: "127.0.0.1:0"}) })
}

func TestRelayStress(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	stress(t, 20, func(t *testing.T) Component {
		r, err := outbox.NewRelay(db.DB, outbox.RelayConfig{PollInterval: time.Millisecond, Endpoints: map[string]string{
			outbox.EventStockRelease: "http://127.0.0.1:1/stock", outbox.EventCouponRestore: "http://127.0.0.1:1/coupon"}})
		require.NoError(t, err)
		return r
	})
}

func TestDispatcherStress(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rdb, prefix := redistest.Client(t)
	stress(t, 20, func(t *testing.T) Component {
		d, err := delay.NewDispatcher(db.DB, rdb, delay.Config{KeyPrefix: prefix, PollInterval: time.Millisecond})
		require.NoError(t, err)
		return d
	})
}

// A source's dispatcher under lateStart, its database up, and down (Start
// then leaves retries running, which Stop ends).
func TestLateStartStress(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	down, err := sqlx.Open("mysql", "root@tcp("+deadAddr(t)+")/x?timeout=1s")
	require.NoError(t, err)
	defer down.Close()
	rdb, prefix := redistest.Client(t)
	for _, on := range []*sqlx.DB{db.DB, down} {
		stress(t, 5, func(t *testing.T) Component {
			d, err := delay.NewDispatcher(on, rdb, delay.Config{KeyPrefix: prefix, PollInterval: time.Millisecond})
			require.NoError(t, err)
			return &lateStart{name: "late", c: d, log: slog.New(slog.DiscardHandler), every: time.Millisecond}
		})
	}
}

func newRabbitMQTimer(t *testing.T, db *dbtest.DB, prefix string) *delay.RabbitMQTimer {
	rt, err := delay.NewRabbitMQTimer(db.DB, delay.RabbitMQConfig{URL: rabbittest.URL(), Prefix: prefix})
	require.NoError(t, err)
	return rt
}

func TestRabbitMQTimerStress(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	prefix := rabbittest.Prefix(t)
	stress(t, 5, func(t *testing.T) Component { return newRabbitMQTimer(t, db, prefix) })
}

// The dispatcher on the RabbitMQ timer: the timer starts before it and
// stops after it, as serve's Open and Close do.
func TestDispatcherOnRabbitMQStress(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	rdb, redisPrefix := redistest.Client(t)
	prefix := rabbittest.Prefix(t)
	stress(t, 5, func(t *testing.T) Component {
		rt := newRabbitMQTimer(t, db, prefix)
		require.NoError(t, rt.Start(t.Context()))
		t.Cleanup(func() { require.NoError(t, rt.Stop(context.Background())) })
		d, err := delay.NewDispatcher(db.DB, rdb, delay.Config{KeyPrefix: redisPrefix, Timer: rt, PollInterval: time.Millisecond})
		require.NoError(t, err)
		return d
	})
}

func TestXXLJobExecutorStress(t *testing.T) {
	t.Parallel()
	logs := t.TempDir()
	stress(t, 20, func(t *testing.T) Component {
		e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"}, AppName: "stress",
			Address: "http://127.0.0.1:9999/", ListenAddr: "127.0.0.1:0", LogPath: logs, HTTPClientTimeout: time.Second})
		require.NoError(t, err)
		return xxlExecutor{e, slog.New(slog.DiscardHandler)}
	})
}
