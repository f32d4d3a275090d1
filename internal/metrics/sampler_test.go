package metrics

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func gatherValue(t *testing.T, m *Metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := m.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range mt.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case mt.Gauge != nil:
				return mt.Gauge.GetValue(), true
			case mt.Counter != nil:
				return mt.Counter.GetValue(), true
			}
		}
	}
	return 0, false
}

// A sampler reads its source once per interval however often it is
// scraped, and keeps its last values when a read fails.
func TestSamplerCachesAndKeepsValuesOnError(t *testing.T) {
	t.Parallel()
	m := New(Config{SampleTimeout: time.Second})
	desc := prometheus.NewDesc("test_sampled", "test", nil, nil)
	var reads atomic.Int32
	var fail atomic.Bool
	var val atomic.Int64
	val.Store(7)
	s := m.newSampler("test", time.Hour, []*prometheus.Desc{desc}, func(ctx context.Context) ([]prometheus.Metric, error) {
		reads.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			return nil, errors.New("no deadline")
		}
		if fail.Load() {
			return nil, errors.New("database away")
		}
		return []prometheus.Metric{prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(val.Load()))}, nil
	})
	m.reg.MustRegister(s)

	for range 3 {
		v, ok := gatherValue(t, m, "test_sampled", nil)
		require.True(t, ok)
		require.Equal(t, 7.0, v)
	}
	require.Equal(t, int32(1), reads.Load(), "one read per interval")
	ok, _ := gatherValue(t, m, SamplerLastSuccess, map[string]string{"sampler": "test"})
	require.NotZero(t, ok)

	// The interval passes and the database is away: the last value stays,
	// the error is counted.
	s.mu.Lock()
	s.at = time.Now().Add(-2 * time.Hour)
	s.mu.Unlock()
	fail.Store(true)
	val.Store(9)
	v, _ := gatherValue(t, m, "test_sampled", nil)
	require.Equal(t, 7.0, v)
	require.Equal(t, int32(2), reads.Load())
	errs, _ := gatherValue(t, m, SamplerErrorsTotal, map[string]string{"sampler": "test"})
	require.Equal(t, 1.0, errs)

	// Back: the next interval reads the new value.
	s.mu.Lock()
	s.at = time.Now().Add(-2 * time.Hour)
	s.mu.Unlock()
	fail.Store(false)
	v, _ = gatherValue(t, m, "test_sampled", nil)
	require.Equal(t, 9.0, v)
}
