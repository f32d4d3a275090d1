package xxljobprom_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobprom"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestObserver(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := xxljobprom.New(xxljobprom.Options{ConstLabels: prometheus.Labels{"app": "billing"}})
	reg.MustRegister(obs)

	admin := xxljobtest.New(t, xxljobtest.Options{})
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{admin.URL}, AdminVersion: xxljob.Admin2x, AppName: "billing",
		ListenAddr: "127.0.0.1:0", Address: "http://127.0.0.1:9999/", LogPath: t.TempDir(), Observer: obs, RegistryInterval: time.Hour})
	require.NoError(t, err)
	obs.Watch(e)
	require.NoError(t, e.Register("ok", xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error { return nil })))
	require.NoError(t, e.Register("slow", xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
		return errors.New("upstream: " + xxljob.ErrTimeout.Error())
	})))
	require.NoError(t, e.Start(t.Context()))
	c := xxljobtest.NewClient("http://"+e.Addr().String(), "", xxljobtest.V24)
	defer c.Close()
	p := xxljobtest.Trigger(1, "ok", 7)
	_, err = c.Run(t.Context(), p)
	require.NoError(t, err)
	_, err = admin.WaitCallback(7, 5*time.Second)
	require.NoError(t, err)
	res, err := e.RunOnce(t.Context(), "slow", "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeFail, res.Code)

	got := func(name string, labels ...string) float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metric:
			for _, m := range mf.GetMetric() {
				for i := 0; i+1 < len(labels); i += 2 {
					found := false
					for _, lp := range m.GetLabel() {
						found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
					}
					if !found {
						continue metric
					}
				}
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	// The first heartbeat runs beside the triggers above; Shutdown cancels
	// one still in flight, so wait for its answer before stopping.
	require.Eventually(t, func() bool { return got("xxljob_registry_heartbeats_total", "result", "ok") == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, e.Shutdown(t.Context()))

	require.Equal(t, 1.0, got("xxljob_runs_total", "handler", "ok", "result", "success", "app", "billing"))
	require.Equal(t, 1.0, got("xxljob_runs_total", "handler", "slow", "result", "fail"))
	require.Equal(t, 0.0, got("xxljob_runs_in_progress", "handler", "ok"))
	require.Equal(t, 1.0, got("xxljob_run_duration_seconds", "handler", "ok"))
	require.Equal(t, 1.0, got("xxljob_callback_results_total", "result", "ok"))
	require.Equal(t, 0.0, got("xxljob_callback_spool_results"))
	require.Equal(t, 0.0, got("xxljob_callback_queue_length"))
	require.Equal(t, 1.0, got("xxljob_registry_heartbeats_total", "result", "ok"))
	require.Greater(t, got("xxljob_registry_last_success_timestamp_seconds"), 1e9)

	// Names lists exactly what the registry carries.
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, strings.TrimPrefix(mf.GetName(), "xxljob_"))
	}
	want := slices.Clone(xxljobprom.Names)
	slices.Sort(want)
	require.Equal(t, want, names)
}
