package outbox_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/orders/outbox"
)

// statusReceiver answers every delivery with the status it is set to.
type statusReceiver struct {
	srv    *httptest.Server
	status atomic.Int32
	calls  atomic.Int32
}

func newStatusReceiver(t *testing.T, status int) *statusReceiver {
	t.Helper()
	r := &statusReceiver{}
	r.status.Store(int32(status))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.calls.Add(1)
		w.WriteHeader(int(r.status.Load()))
		_, _ = w.Write([]byte("answer " + http.StatusText(int(r.status.Load()))))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func statusRelay(t *testing.T, b *testBundle, inv, cpn *statusReceiver, maxAttempts int) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(b.DB.DB, outbox.RelayConfig{
		Endpoints:   map[string]string{outbox.EventStockRelease: inv.srv.URL, outbox.EventCouponRestore: cpn.srv.URL},
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond, MaxAttempts: maxAttempts,
	})
	require.NoError(t, err)
	return r
}

// runDue runs the relay until nothing is due (backoffs of a millisecond).
func runDue(t *testing.T, b *testBundle, r *outbox.Relay) outbox.RelayStats {
	t.Helper()
	var total outbox.RelayStats
	for range 100 {
		time.Sleep(2 * time.Millisecond)
		st, err := r.RunOnce(b.Ctx)
		require.NoError(t, err)
		total.Claimed += st.Claimed
		total.Delivered += st.Delivered
		total.Failed += st.Failed
		total.Parked += st.Parked
		if st.Claimed == 0 {
			return total
		}
	}
	t.Fatal("events still due after 100 passes")
	return total
}

// An event its receiver refuses for good (404) is parked at once, with the
// reason; 429 and 408 are retried; an event failing outbox.maxAttempts
// times is parked too. Parked events wait for an operator, show in the
// view and the gauge, and deliver once requeued.
func TestPermanentRefusalParksOutboxEvent(t *testing.T) {
	t.Parallel()
	b, base := closedInOutbox(t, 4)
	inv := newStatusReceiver(t, http.StatusNotFound)
	cpn := newStatusReceiver(t, http.StatusTooManyRequests)
	r := statusRelay(t, b, inv, cpn, 3)
	ob := outbox.NewOps(b.DB.DB)
	count := func(status, typ string) int {
		return b.Count(t, `SELECT COUNT(*) FROM order_outbox WHERE status = ? AND event_type = ?`, status, typ)
	}
	stock, coupons := count("pending", outbox.EventStockRelease), count("pending", outbox.EventCouponRestore)
	require.Equal(t, 4, stock)
	require.Positive(t, coupons)

	st, err := r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, stock, st.Parked, "404: parked at the first answer")
	require.Equal(t, coupons, st.Failed, "429: retried")
	require.Equal(t, stock, count("parked", outbox.EventStockRelease))
	l, err := ob.List(b.Ctx, outbox.Filter{Status: outbox.Parked})
	require.NoError(t, err)
	require.Len(t, l.Events, stock)
	for _, e := range l.Events {
		require.Equal(t, "permanent answer: status 404", e.ParkReason)
		require.Equal(t, 1, e.Attempts)
		require.Contains(t, e.LastError, "status 404")
		require.NotNil(t, e.ParkedAt)
		require.True(t, json.Valid(e.Payload))
	}

	cpn.status.Store(http.StatusRequestTimeout)
	time.Sleep(2 * time.Millisecond)
	st, err = r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, coupons, st.Failed, "408: retried")
	require.Zero(t, st.Parked)
	cpn.status.Store(http.StatusServiceUnavailable)
	st = runDue(t, b, r)
	require.Equal(t, coupons, st.Parked, "the third failed attempt parks")
	require.Equal(t, coupons, count("parked", outbox.EventCouponRestore))
	ev, err := ob.List(b.Ctx, outbox.Filter{Status: outbox.Parked, EventType: outbox.EventCouponRestore, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "3 attempts failed (outbox.maxAttempts)", ev.Events[0].ParkReason)
	require.Equal(t, 3, ev.Events[0].Attempts)

	s, err := ob.Stats(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.Stats{Pending: 0, Parked: stock + coupons}, s)
	backlog, err := r.Backlog(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, stock+coupons, backlog.Parked)
	require.Zero(t, runDue(t, b, r).Claimed, "parked events are not claimed")

	// The receivers are fixed; the operator requeues one, then the rest.
	inv.status.Store(http.StatusOK)
	cpn.status.Store(http.StatusNoContent)
	one := l.Events[0]
	got, err := ob.Requeue(b.Ctx, one.ID)
	require.NoError(t, err)
	require.Equal(t, outbox.Pending, got.Status)
	require.Zero(t, got.Attempts)
	require.Empty(t, got.ParkReason)
	_, err = ob.Requeue(b.Ctx, one.ID)
	require.ErrorIs(t, err, outbox.ErrNotParked)
	_, err = ob.Requeue(b.Ctx, 1<<40)
	require.ErrorIs(t, err, outbox.ErrNotFound)
	n, err := ob.RequeueParked(b.Ctx, outbox.EventCouponRestore)
	require.NoError(t, err)
	require.Equal(t, coupons, n)
	n, err = ob.RequeueParked(b.Ctx, "")
	require.NoError(t, err)
	require.Equal(t, stock-1, n)
	require.Equal(t, stock+coupons, runDue(t, b, r).Delivered)
	require.NoError(t, ordertest.CheckOutbox(b.Ctx, b.DB, base, ordertest.OutboxOptions{Delivered: true}))
}
