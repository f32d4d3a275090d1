package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/internal/ordertest"
)

// With order.sources every unit the close sweeps has its overdue gauges,
// labelled with its source and table, read on its source's sampler: a
// source that does not answer leaves the others' gauges there. mysql.dsn's
// own order table is no unit, so it has none; its letters are sampled.
func TestOverdueGaugesPerUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	createTables(t, other, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_item_1 LIKE order_item")
	ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: "B-1", Age: time.Hour})
	ordertest.Order(t, home.DB, ordertest.OrderOpts{OrderNo: "H-1", Age: time.Hour})
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: "order_info, order_info_1"}]`, deadDSN(t), other.DSN)))
	require.NoError(t, err)
	d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler), Observers{})
	require.NoError(t, err)
	defer d.Close()

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond})
	watchServe(m, nil, d)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	s := metricstest.Scrape(t, srv.URL)
	get := func(name string, labels ...string) float64 {
		t.Helper()
		v, ok := s.Value(name, labels...)
		require.True(t, ok, "no series %s%v", name, labels)
		return v
	}
	require.Equal(t, 1.0, get(metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info"))
	require.InDelta(t, 30*60, get(metrics.OrdersOverdueOldestAge, "source", "b", "table", "order_info"), 60)
	require.Equal(t, 0.0, get(metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info_1"))
	require.Equal(t, 0.0, get(metrics.OrdersDeadLetters, "source", "default", "stage", "close", "status", "waiting"))
	for _, src := range []string{"a", "default"} {
		_, ok := s.Value(metrics.OrdersOverdueUnpaid, "source", src)
		require.False(t, ok, "no overdue gauge of source %s", src)
	}
	s = metricstest.Scrape(t, srv.URL) // the error counters are collected beside the samplers: counted by the next scrape
	require.Positive(t, get(metrics.SamplerErrorsTotal, "sampler", "orders:a"))
	require.Zero(t, get(metrics.SamplerErrorsTotal, "sampler", "orders:b"))
	require.Equal(t, 1.0, get(metrics.OrdersOverdueUnpaid, "source", "b", "table", "order_info"), "b's gauges stay while a fails")
}
