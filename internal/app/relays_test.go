package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/outbox"
)

// Outbox mode with order.sources: each order database gets a relay of its
// own, so the events a close writes in source b's database are delivered
// by b's relay, while source a, whose server does not answer, fails only
// its own relay's passes (counted per source).
func TestRelayPerSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	var mu sync.Mutex
	got := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, map[string]string{"ORDER_COMPENSATION_MODE": "outbox",
		"ORDER_COMPENSATION_INVENTORY_URL": recv.URL + "/stock", "ORDER_COMPENSATION_COUPON_URL": recv.URL + "/coupon"},
		fmt.Sprintf(`[{name: a, dsn: %q, tables: order_info}, {name: b, dsn: %q, tables: order_info}]`, deadDSN(t), other.DSN)))
	require.NoError(t, err, "outbox mode is accepted with order.sources")
	var logged syncbuf.Buffer
	d, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
	require.NoError(t, err)
	defer d.Close()
	var names []string
	for _, r := range d.relays {
		names = append(names, r.Source)
	}
	require.Equal(t, []string{"default", "a", "b"}, names, "mysql.dsn's database, then each source's")

	ordertest.Order(t, other.DB, ordertest.OrderOpts{OrderNo: "B-1", Age: time.Hour, Items: []ordertest.Item{{SKU: 1, Qty: 2}}, Coupon: true})
	unit := d.units[1]
	require.Equal(t, "b/order_info", unit.Source()+"/"+unit.Table())
	st, err := unit.Run(ctx, orders.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Closed)
	require.Equal(t, 2, other.Count(t, `SELECT COUNT(*) FROM order_outbox`), "the close wrote its events in b's database")

	m := metrics.New(metrics.Config{SampleInterval: time.Millisecond})
	watchServe(m, nil, d)
	for _, r := range d.relays {
		require.NoError(t, r.Relay.Start(ctx))
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["B-1:stock.release"] > 0 && got["B-1:coupon.restore"] > 0
	}, 15*time.Second, 20*time.Millisecond, "b's relay delivers b's events while a does not answer")
	require.Eventually(t, func() bool { return d.relays[1].Relay.Stats().PassErrors > 0 }, 15*time.Second, 20*time.Millisecond)
	for _, r := range d.relays {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(t, r.Relay.Stop(sctx), "relay %s", r.Source)
		cancel()
	}

	sdbs, err := sourceDBs(cfg, d.db, d.unitDBs)
	require.NoError(t, err)
	views := sourcedViews(d.db, sdbs, outbox.NewOps)
	require.Equal(t, []string{"a", "b"}, slices.Sorted(maps.Keys(views.By)), "?source= names every order source")
	bst, err := views.By["b"].Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.Stats{}, bst, "b's view reads b's database: all delivered")
	_, err = views.By["a"].Stats(ctx)
	require.Error(t, err, "a's view reads a's database, which does not answer")

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	s := metricstest.Scrape(t, srv.URL)
	delivered, _ := s.Value(metrics.OutboxDeliveriesTotal, "source", "b", "result", "delivered")
	require.Equal(t, 2.0, delivered)
	failing, _ := s.Value(metrics.OutboxPassErrorsTotal, "source", "a")
	require.Positive(t, failing, "a's relay counts its failed passes")
	for _, src := range []string{"default", "b"} {
		v, ok := s.Value(metrics.OutboxPassErrorsTotal, "source", src)
		require.True(t, ok, src)
		require.Zero(t, v, "%s's relay did not fail", src)
	}
	pending, ok := s.Value(metrics.OutboxPending, "source", "b")
	require.True(t, ok)
	require.Zero(t, pending)
	require.Contains(t, logged.String(), `source=a`)
}
