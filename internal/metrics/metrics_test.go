package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/xxljob"
)

func scrape(t *testing.T, m *metrics.Metrics) metricstest.Samples {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	return metricstest.Scrape(t, srv.URL)
}

// downDB is a pool on a database that never answers.
func downDB(t *testing.T) *sqlx.DB {
	db := sqlx.MustOpen("mysql", "root@tcp(127.0.0.1:1)/down?parseTime=true&timeout=2s")
	t.Cleanup(func() { db.Close() })
	return db
}

func value(t *testing.T, s metricstest.Samples, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.Value(name, labels...)
	require.True(t, ok, "no series %s%v", name, labels)
	return v
}

// newExecutor builds an executor (not started: RunOnce needs no admin) whose
// observer is m's.
func newExecutor(t *testing.T, m *metrics.Metrics) *xxljob.Executor {
	t.Helper()
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true,
		AdminAddresses: []string{"http://127.0.0.1:1/xxl-job-admin"},
		AppName:        "metrics-test",
		LogPath:        t.TempDir(),
		Observer:       m.XXLJob(),
	})
	require.NoError(t, err)
	return e
}

// Runs are counted by handler and result, and what the close path reports
// from inside a run is labelled with the run's handler and shard.
func TestRunsAndClosePathByHandler(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	e := newExecutor(t, m)
	ob := m.Orders()
	require.NoError(t, e.Register("probeJob", xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		ob.ClosePage(ctx, orders.PageReport{ShardIndex: req.ShardIndex, ShardTotal: req.ShardTotal,
			Scanned: 9, Closed: 4, DeadLettered: 1, SkippedPaid: 1, SkippedLocked: 2, SkippedClosed: 1})
		ob.ClosePage(ctx, orders.PageReport{DryRun: true, Scanned: 100, Closed: 100})
		ob.OrdersClosed(ctx, []time.Duration{3 * time.Second, 90 * time.Second, time.Hour, 2 * time.Second})
		ob.LocksAcquired(ctx, orderlock.Report{Keys: 9, Held: 7, Taken: 2, Duration: 3 * time.Millisecond})
		return nil
	})))
	require.NoError(t, e.Register("failJob", xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
		return errors.New("no")
	})))
	res, err := e.RunOnce(t.Context(), "probeJob", "", 2, 4, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code)
	for range 2 {
		res, err = e.RunOnce(t.Context(), "failJob", "", 0, 1, nil)
		require.NoError(t, err)
		require.Equal(t, xxljob.CodeFail, res.Code)
	}
	// Outside any run: "other".
	ob.ClosePage(context.Background(), orders.PageReport{Single: true, ShardTotal: 1, Scanned: 1, SkippedParked: 1})
	// A unit of order.sources: its source and table label the series.
	ob.ClosePage(context.Background(), orders.PageReport{Source: "db1", Table: "t_order_3", ShardTotal: 1, Scanned: 5, Closed: 5})

	s := scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.XXLRunsTotal, "handler", "probeJob", "result", "success"))
	require.Equal(t, 2.0, value(t, s, metrics.XXLRunsTotal, "handler", "failJob", "result", "fail"))
	require.Equal(t, 2.0, value(t, s, metrics.XXLRunDurationSeconds+"_count", "handler", "failJob"))
	require.Equal(t, 0.0, value(t, s, metrics.XXLRunsInProgress, "handler", "probeJob"))

	run := []string{"handler", "probeJob", "shard", "2"}
	require.Equal(t, 9.0, value(t, s, metrics.OrdersScannedTotal, run...), "the dry run is not counted")
	require.Equal(t, 4.0, value(t, s, metrics.OrdersClosedTotal, run...))
	require.Equal(t, 1.0, value(t, s, metrics.OrdersFailedTotal, run...))
	for reason, want := range map[string]float64{"paid": 1, "locked": 2, "closed": 1, "not_due": 0, "parked": 0} {
		require.Equal(t, want, value(t, s, metrics.OrdersSkippedTotal, append(run, "reason", reason)...), reason)
	}
	require.Equal(t, 1.0, value(t, s, metrics.OrdersSkippedTotal, "handler", "other", "shard", "0", "source", "", "reason", "parked"))
	require.Equal(t, 5.0, value(t, s, metrics.OrdersClosedTotal, "handler", "other", "source", "db1", "table", "t_order_3"))
	require.Equal(t, 4.0, value(t, s, metrics.OrdersLatenessSeconds+"_count", "handler", "probeJob"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersLatenessSeconds+"_bucket", "handler", "probeJob", "le", "5"))
	require.InDelta(t, 3695.0, value(t, s, metrics.OrdersLatenessSeconds+"_sum", "handler", "probeJob"), 1e-9)
	require.Equal(t, 7.0, value(t, s, metrics.OrdersLockKeysTotal, "result", "acquired"))
	require.Equal(t, 2.0, value(t, s, metrics.OrdersLockKeysTotal, "result", "taken"))
	require.Equal(t, 0.0, value(t, s, metrics.OrdersLockKeysTotal, "result", "error"))
	require.Equal(t, 1.0, value(t, s, metrics.OrdersLockAcquireSeconds+"_count"))
}

func TestCallbacksAndRegistry(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	e := newExecutor(t, m)
	m.WatchExecutor(e)
	o := m.XXLJob()

	s := scrape(t, m)
	require.Equal(t, 0.0, value(t, s, metrics.XXLRegistryLastSuccess), "no registration yet")
	require.Equal(t, 0.0, value(t, s, metrics.XXLCallbackQueueLength))
	require.Equal(t, 0.0, value(t, s, metrics.XXLRegistryHeartbeatsTotal, "result", "error"), "zero before the first")

	before := time.Now()
	o.Registered(errors.New("admin down"))
	o.Registered(nil)
	o.CallbackSent(3, nil)
	o.CallbackSent(2, errors.New("admin down"))
	o.CallbackSpool(4)
	s = scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.XXLRegistryHeartbeatsTotal, "result", "ok"))
	require.Equal(t, 1.0, value(t, s, metrics.XXLRegistryHeartbeatsTotal, "result", "error"))
	require.InDelta(t, float64(before.Unix()), value(t, s, metrics.XXLRegistryLastSuccess), 2)
	require.Equal(t, 1.0, value(t, s, metrics.XXLCallbackBatchesTotal, "result", "error"))
	require.Equal(t, 3.0, value(t, s, metrics.XXLCallbackResultsTotal, "result", "ok"))
	require.Equal(t, 2.0, value(t, s, metrics.XXLCallbackResultsTotal, "result", "error"))
	require.Equal(t, 4.0, value(t, s, metrics.XXLCallbackSpoolResults))
}

func TestDelayAttempts(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	d := m.Delay()
	d.TaskAttempted("orderTimeoutClose", "done", 30*time.Millisecond, time.Millisecond)
	d.TaskAttempted("orderTimeoutClose", "retry", -2*time.Millisecond, time.Millisecond)
	d.TaskAttempted("http:billing/invoices/123", "done", time.Second, time.Millisecond)
	d.TaskAttempted("http:billing/invoices/456", "failed", time.Second, time.Millisecond)

	s := scrape(t, m)
	require.Equal(t, 1.0, value(t, s, metrics.DelayAttemptsTotal, "handler", "orderTimeoutClose", "result", "retry"))
	require.Equal(t, 1.0, value(t, s, metrics.DelayAttemptsTotal, "handler", "http:billing", "result", "failed"),
		"HTTP targets are labelled by service, not path")
	require.Equal(t, 2.0, value(t, s, metrics.DelayLatenessSeconds+"_count", "handler", "http:billing"))
	require.Equal(t, 1.0, value(t, s, metrics.DelayLatenessSeconds+"_bucket", "handler", "orderTimeoutClose", "le", "0.005"),
		"a slightly negative lateness (clock estimate) counts as on time")
	require.Equal(t, 2.0, value(t, s, metrics.DelayLatenessSeconds+"_bucket", "handler", "orderTimeoutClose", "le", "0.05"))
}

// Names lists every series a scrape can carry, and nothing is served that
// it does not list.
func TestNamesCoverWhatIsServed(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	m.WatchExecutor(newExecutor(t, m))
	m.XXLJob().RunFinished("h", 1, 1, xxljob.CodeSuccess, time.Second)
	m.Orders().ClosePage(context.Background(), orders.PageReport{Scanned: 1, Closed: 1})
	m.Orders().OrdersClosed(context.Background(), []time.Duration{time.Second})
	m.Orders().LocksAcquired(context.Background(), orderlock.Report{Keys: 1, Held: 1})
	m.Delay().TaskAttempted("x", "done", 0, 0)
	names := map[string]bool{}
	for _, n := range m.Names() {
		names[n] = true
	}
	s := scrape(t, m)
	s = append(s, scrape(t, m)...) // the handler's own counters appear from the second scrape
	for n := range s.Names() {
		require.True(t, names[n], "served %s, which Names does not list", n)
	}
	for _, n := range []string{metrics.OrdersOverdueUnpaid, metrics.OrdersOverdueOldestAge, metrics.OrdersDeadLetters,
		metrics.DelayTasks, metrics.DelayTasksDue, metrics.DelayClaimsTotal, metrics.XXLCallbackQueueLength,
		metrics.XXLRunDurationSeconds + "_bucket", "go_goroutines", "process_resident_memory_bytes", "go_sql_in_use_connections",
		metrics.SamplerErrorsTotal} {
		require.True(t, names[n], "Names lacks %s", n)
	}
}

// executor_build_info names the binary.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	s := scrape(t, metrics.New(metrics.Config{Version: "1.4.0", Commit: "0123abc"}))
	require.Equal(t, 1.0, value(t, s, metrics.BuildInfo, "version", "1.4.0", "commit", "0123abc", "goversion", runtime.Version()))
	s = scrape(t, metrics.New(metrics.Config{}))
	require.Equal(t, 1.0, value(t, s, metrics.BuildInfo, "version", "unknown", "commit", "unknown"))
}

// executor_auth_failures_total counts refused authentications by surface,
// each surface exported from the start.
func TestAuthFailures(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Config{})
	require.Equal(t, 0.0, value(t, scrape(t, m), metrics.AuthFailuresTotal, "surface", metrics.SurfaceConsole))
	for range 3 {
		m.AuthFailed(metrics.SurfaceExecutor)
	}
	m.AuthFailed(metrics.SurfaceAPI)
	s := scrape(t, m)
	require.Equal(t, 3.0, value(t, s, metrics.AuthFailuresTotal, "surface", metrics.SurfaceExecutor))
	require.Equal(t, 1.0, value(t, s, metrics.AuthFailuresTotal, "surface", metrics.SurfaceAPI))
}
