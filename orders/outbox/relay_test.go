package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/sql/migrations"
)

// receiver is an httptest inventory or coupon service that fails sometimes.
// It dedupes on Idempotency-Key as the contract asks, applies each event's
// effect once, and records what it saw.
type receiver struct {
	srv   *httptest.Server
	token string
	// Odds of each answer: failRate a 500 before applying, lostAckRate
	// applying and then answering 500 (the acknowledgement is lost),
	// slowRate answering after the relay gave up; the rest 200.
	failRate, lostAckRate, slowRate float64
	failBody                        string        // the body of a failRate 500 ("" a plain text one)
	block                           chan struct{} // if set, every request waits for it to close

	mu        sync.Mutex
	requests  int
	acked     map[string]int    // 2xx answers per key
	applied   map[string]bool   // keys applied
	inFlight  map[string]bool   // keys being handled now
	overlaps  int               // a key arriving while it was in flight
	traces    map[string]string // key -> X-Trace-Id
	attempts  map[string]int    // key -> highest X-Delivery-Attempt
	badHeader []string
	stock     map[int64]int64 // released per SKU (inventory)
	coupons   map[int64]int   // restores per coupon (coupon service)
	started   chan struct{}   // gets a value per request (if set)
}

// newReceiver starts a receiver configured by opts (before it serves).
func newReceiver(t *testing.T, token string, opts ...func(*receiver)) *receiver {
	t.Helper()
	r := &receiver{token: token, acked: map[string]int{}, applied: map[string]bool{}, inFlight: map[string]bool{},
		traces: map[string]string{}, attempts: map[string]int{}, stock: map[int64]int64{}, coupons: map[int64]int{}}
	for _, o := range opts {
		o(r)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (rc *receiver) serve(w http.ResponseWriter, req *http.Request) {
	key := req.Header.Get("Idempotency-Key")
	typ := req.Header.Get("X-Event-Type")
	attempt, _ := strconv.Atoi(req.Header.Get("X-Delivery-Attempt"))
	var body ordertest.EventBody
	decodeErr := json.NewDecoder(req.Body).Decode(&body)

	rc.mu.Lock()
	rc.requests++
	switch {
	case req.Header.Get("X-Service-Token") != rc.token:
		rc.badHeader = append(rc.badHeader, "token")
	case decodeErr != nil || key != outbox.IdempotencyKey(body.OrderNo, body.EventType) || typ != body.EventType:
		rc.badHeader = append(rc.badHeader, fmt.Sprintf("key %q type %q body %+v (%v)", key, typ, body, decodeErr))
	case req.Header.Get("X-Trace-Id") == "" || req.Header.Get("X-Outbox-Id") == "" || attempt < 1:
		rc.badHeader = append(rc.badHeader, "trace, outbox id or attempt missing")
	}
	if prev, ok := rc.traces[key]; ok && prev != req.Header.Get("X-Trace-Id") {
		rc.badHeader = append(rc.badHeader, "trace id changed for "+key)
	}
	rc.traces[key] = req.Header.Get("X-Trace-Id")
	rc.attempts[key] = max(rc.attempts[key], attempt)
	if rc.inFlight[key] {
		rc.overlaps++
	}
	rc.inFlight[key] = true
	roll := rand.Float64()
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		delete(rc.inFlight, key)
		rc.mu.Unlock()
	}()
	select {
	case rc.started <- struct{}{}:
	default:
	}
	if rc.block != nil {
		<-rc.block
	}

	apply := func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.applied[key] {
			return // a repeat: acknowledge, do not apply again
		}
		rc.applied[key] = true
		for _, it := range body.Items {
			rc.stock[it.SKUID] += it.Quantity
		}
		if body.CouponID != 0 {
			rc.coupons[body.CouponID]++
		}
	}
	switch {
	case roll < rc.failRate && rc.failBody != "":
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, rc.failBody)
	case roll < rc.failRate:
		http.Error(w, "inventory database busy", http.StatusInternalServerError)
	case roll < rc.failRate+rc.lostAckRate:
		apply()
		http.Error(w, "gateway lost the answer", http.StatusBadGateway)
	case roll < rc.failRate+rc.lostAckRate+rc.slowRate:
		select {
		case <-req.Context().Done():
		case <-time.After(3 * time.Second):
		}
	default:
		apply()
		rc.mu.Lock()
		rc.acked[key]++
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (rc *receiver) snapshot() (acked map[string]int, overlaps int, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	acked = make(map[string]int, len(rc.acked))
	for k, v := range rc.acked {
		acked[k] = v
	}
	return acked, rc.overlaps, append([]string(nil), rc.badHeader...)
}

func newRelay(t *testing.T, b *testBundle, inv, cpn *receiver, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	cfg.Endpoints = map[string]string{
		outbox.EventStockRelease:  inv.srv.URL + "/stock/release",
		outbox.EventCouponRestore: cpn.srv.URL + "/coupons/restore",
	}
	cfg.Token = inv.token
	r, err := outbox.NewRelay(b.DB.DB, cfg)
	require.NoError(t, err)
	return r
}

// Three relays deliver every event to inventory and coupon services that
// fail, lose acknowledgements and time out: each event ends acknowledged and
// marked done exactly once, no event is ever sent by two relays at once,
// and the services, deduping on Idempotency-Key, apply exactly the closed
// orders' stock and coupons.
func TestRelayDeliversEveryEvent(t *testing.T) {
	t.Parallel()
	b, base := closedInOutbox(t, 1200)
	events := b.events(t)
	flaky := func(rc *receiver) { rc.failRate, rc.lostAckRate, rc.slowRate = 0.2, 0.1, 0.02 }
	inv := newReceiver(t, "svc-token", flaky)
	cpn := newReceiver(t, "svc-token", flaky)
	cfg := outbox.RelayConfig{Timeout: 500 * time.Millisecond, BatchSize: 40, Workers: 6, PollInterval: 10 * time.Millisecond,
		ClaimTTL: 3 * time.Second, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	relays := []*outbox.Relay{newRelay(t, b, inv, cpn, cfg), newRelay(t, b, inv, cpn, cfg), newRelay(t, b, inv, cpn, cfg)}
	// The backlog gauge: every event pending, aged by its oldest.
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_outbox SET created_at = UTC_TIMESTAMP(3) - INTERVAL 90 SECOND ORDER BY id LIMIT 1`)
	require.NoError(t, err)
	backlog, err := relays[0].Backlog(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, len(events), backlog.Pending)
	require.GreaterOrEqual(t, backlog.OldestAge, 90*time.Second)
	require.Less(t, backlog.OldestAge, 5*time.Minute)
	for _, r := range relays {
		require.NoError(t, r.Start(b.Ctx))
	}
	require.Eventually(t, func() bool {
		backlog, err := relays[0].Backlog(b.Ctx)
		require.NoError(t, err)
		return backlog.Pending == 0 && backlog.OldestAge == 0
	}, 2*time.Minute, 20*time.Millisecond)
	var total outbox.RelayStats
	for _, r := range relays {
		require.NoError(t, r.Stop(b.Ctx))
		require.NoError(t, r.Stop(b.Ctx), "Stop twice")
		st := r.Stats()
		require.Positive(t, st.Delivered, "every relay took a share")
		total.Claimed += st.Claimed
		total.Delivered += st.Delivered
		total.Failed += st.Failed
		total.Superseded += st.Superseded
	}
	t.Logf("%d events: %+v", len(events), total)
	require.Equal(t, len(events), total.Delivered, "each event marked done exactly once")
	require.Zero(t, total.Superseded)
	require.Positive(t, total.Failed, "the services failed sometimes")

	rows := b.events(t)
	extraAcks := 0
	acked := map[string]int{}
	attempts := map[string]int{}
	for _, rc := range []*receiver{inv, cpn} {
		a, overlaps, bad := rc.snapshot()
		require.Zero(t, overlaps, "no event in flight twice")
		require.Empty(t, bad)
		for k, v := range a {
			acked[k] += v
		}
		rc.mu.Lock()
		for k, v := range rc.attempts {
			attempts[k] = v
		}
		rc.mu.Unlock()
	}
	for _, r := range rows {
		key := outbox.IdempotencyKey(r.OrderNo, r.EventType)
		require.Equal(t, "done", r.Status, key)
		require.NotNil(t, r.DeliveredAt, key)
		require.Empty(t, r.LastError)
		// Usually once; twice only if a 2xx came back after the relay had
		// given up on the call (at least once, deduped by the receiver).
		require.GreaterOrEqual(t, acked[key], 1, "acknowledged (%s)", key)
		extraAcks += acked[key] - 1
		require.GreaterOrEqual(t, r.Attempts, attempts[key], "attempts counted (%s)", key)
		rc := inv
		if r.EventType == outbox.EventCouponRestore {
			rc = cpn
		}
		rc.mu.Lock()
		require.Equal(t, r.TraceID, rc.traces[key], "X-Trace-Id is the event's")
		rc.mu.Unlock()
	}

	require.LessOrEqual(t, extraAcks, len(rows)/100, "a relay stops sending an event once acknowledged")

	// The services applied exactly the closed orders' stock and coupons.
	var wantStock []struct {
		SKUID int64 `db:"sku_id"`
		Qty   int64 `db:"qty"`
	}
	require.NoError(t, b.DB.SelectContext(b.Ctx, &wantStock, `SELECT it.sku_id, SUM(it.quantity) AS qty
		FROM order_item it JOIN order_info o ON o.order_no = it.order_no WHERE o.status = 2 GROUP BY it.sku_id`))
	inv.mu.Lock()
	require.Len(t, inv.stock, len(wantStock))
	for _, w := range wantStock {
		require.Equal(t, w.Qty, inv.stock[w.SKUID], "sku %d", w.SKUID)
	}
	inv.mu.Unlock()
	var coupons []int64
	require.NoError(t, b.DB.SelectContext(b.Ctx, &coupons, `SELECT coupon_id FROM order_info WHERE status = 2 AND coupon_id IS NOT NULL`))
	cpn.mu.Lock()
	require.Len(t, cpn.coupons, len(coupons))
	for _, id := range coupons {
		require.Equal(t, 1, cpn.coupons[id], "coupon %d restored once", id)
	}
	cpn.mu.Unlock()
	require.NoError(t, ordertest.CheckOutbox(b.Ctx, b.DB, base, ordertest.OutboxOptions{Delivered: true}))
}

// A failed delivery is retried after an exponential backoff, and its error
// is kept; an event is never due again before its backoff has passed.
func TestRelayBackoff(t *testing.T) {
	t.Parallel()
	b, _ := closedInOutbox(t, 5)
	failing := func(rc *receiver) { rc.failRate = 1 }
	inv := newReceiver(t, "", failing)
	cpn := newReceiver(t, "", failing)
	r := newRelay(t, b, inv, cpn, outbox.RelayConfig{BackoffBase: time.Hour, BackoffMax: 4 * time.Hour})
	n := len(b.events(t))

	var dbNow time.Time
	require.NoError(t, b.DB.GetContext(b.Ctx, &dbNow, `SELECT UTC_TIMESTAMP(3)`))
	st, err := r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.RelayStats{Claimed: n, Failed: n}, st)
	var rows []struct {
		Attempts  int       `db:"attempts"`
		Next      time.Time `db:"next_attempt_at"`
		ClaimID   int64     `db:"claim_id"`
		LastError string    `db:"last_error"`
	}
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT attempts, next_attempt_at, claim_id, last_error FROM order_outbox`))
	for _, row := range rows {
		require.Equal(t, 1, row.Attempts)
		require.Zero(t, row.ClaimID, "claim given up")
		require.Contains(t, row.LastError, "status 500")
		wait := row.Next.Sub(dbNow)
		require.True(t, wait >= 30*time.Minute && wait <= time.Hour+time.Minute, "first retry in half to all of the base: %v", wait)
	}
	st, err = r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, st.Claimed, "not due before the backoff")

	// The second failure waits twice as long.
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE order_outbox SET next_attempt_at = UTC_TIMESTAMP(3)`)
	require.NoError(t, err)
	require.NoError(t, b.DB.GetContext(b.Ctx, &dbNow, `SELECT UTC_TIMESTAMP(3)`))
	_, err = r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT attempts, next_attempt_at, claim_id, last_error FROM order_outbox`))
	for _, row := range rows {
		require.Equal(t, 2, row.Attempts)
		wait := row.Next.Sub(dbNow)
		require.True(t, wait >= time.Hour && wait <= 2*time.Hour+time.Minute, "second retry: %v", wait)
	}
}

// A receiver's error page that is not UTF-8 (GBK) went into last_error as
// it was: the utf8mb4 column refused the UPDATE (Error 1366), so the
// failure was never recorded and the event stayed claimed until its claim
// ran out. Its bytes are now made text first.
func TestRelayRecordsReplyNotUTF8(t *testing.T) {
	t.Parallel()
	b, _ := closedInOutbox(t, 2)
	gbk := func(rc *receiver) { rc.failRate, rc.failBody = 1, "\xbf\xe2\xb4\xe6\xb2\xbb\xd7\xe3" } // 库存不足
	r := newRelay(t, b, newReceiver(t, "", gbk), newReceiver(t, "", gbk), outbox.RelayConfig{BackoffBase: time.Hour, BackoffMax: 4 * time.Hour})
	n := len(b.events(t))
	st, err := r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, outbox.RelayStats{Claimed: n, Failed: n}, st)
	var rows []struct {
		Attempts  int    `db:"attempts"`
		ClaimID   int64  `db:"claim_id"`
		LastError string `db:"last_error"`
	}
	require.NoError(t, b.DB.SelectContext(b.Ctx, &rows, `SELECT attempts, claim_id, last_error FROM order_outbox`))
	require.Len(t, rows, n)
	for _, row := range rows {
		require.Equal(t, 1, row.Attempts)
		require.Zero(t, row.ClaimID)
		require.Contains(t, row.LastError, "status 500: \uFFFD")
	}
}

// A relay that died holding a claim delays its events until the claim runs
// out; then another relay sends them, and the dead relay's claim can no
// longer mark anything.
func TestRelayReclaimsExpiredClaim(t *testing.T) {
	t.Parallel()
	b, _ := closedInOutbox(t, 4)
	n := len(b.events(t))
	const deadClaim = 4242
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE order_outbox SET claim_id = ?, next_attempt_at = UTC_TIMESTAMP(3) + INTERVAL 1 SECOND`, deadClaim)
	require.NoError(t, err)
	inv, cpn := newReceiver(t, ""), newReceiver(t, "")
	r := newRelay(t, b, inv, cpn, outbox.RelayConfig{})

	st, err := r.RunOnce(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, st.Claimed, "claimed by the dead relay")
	require.Eventually(t, func() bool {
		st, err := r.RunOnce(b.Ctx)
		require.NoError(t, err)
		return st.Delivered == n
	}, 10*time.Second, 50*time.Millisecond)
	var ids []int64
	require.NoError(t, b.DB.SelectContext(b.Ctx, &ids, `SELECT id FROM order_outbox`))
	for _, id := range ids {
		changed, err := outbox.MarkDelivered(b.Ctx, b.DB.DB, id, deadClaim)
		require.NoError(t, err)
		require.False(t, changed, "the dead relay's claim is fenced off")
	}
}

// Stop stops claiming and waits for deliveries in flight; if its context
// ends first it cancels them. Claimed events not sent are given back, due
// at once, and a later relay delivers everything.
func TestRelayStop(t *testing.T) {
	t.Parallel()
	b, _ := closedInOutbox(t, 20)
	n := len(b.events(t))
	block := make(chan struct{})
	started := make(chan struct{}, 2)
	blocking := func(rc *receiver) { rc.block, rc.started = block, started }
	inv, cpn := newReceiver(t, "", blocking), newReceiver(t, "", blocking)
	r := newRelay(t, b, inv, cpn, outbox.RelayConfig{Workers: 2, Timeout: 10 * time.Second})
	require.NoError(t, r.Start(b.Ctx))
	<-started // both workers' deliveries are in flight
	<-started

	ctx, cancel := context.WithTimeout(b.Ctx, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Stop(ctx), context.DeadlineExceeded)
	close(block)
	st := r.Stats()
	require.Equal(t, n, st.Claimed)
	require.Equal(t, 2, st.Failed, "the two deliveries in flight were cancelled")
	require.Equal(t, n-2, st.Released)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_outbox WHERE claim_id <> 0`), "no claim left behind")
	require.Equal(t, n-2, b.Count(t, `SELECT COUNT(*) FROM order_outbox WHERE next_attempt_at <= UTC_TIMESTAMP(3)`), "released: due at once")

	r2 := newRelay(t, b, inv, cpn, outbox.RelayConfig{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	require.Eventually(t, func() bool {
		_, err := r2.RunOnce(b.Ctx)
		require.NoError(t, err)
		backlog, err := r2.Backlog(b.Ctx)
		require.NoError(t, err)
		return backlog.Pending == 0
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, r2.Stop(b.Ctx), "Stop without Start")
}

// A started relay whose database refuses its claims keeps polling and
// counts each failed pass (the metric behind OutboxRelayFailing). It warns
// of the first failure and of every 60th after it, not of each, and says
// when passes succeed again.
func TestRelayCountsFailedPasses(t *testing.T) {
	t.Parallel()
	db := dbtest.NewEmpty(t) // no order_outbox: every claim fails
	inv, cpn := newReceiver(t, ""), newReceiver(t, "")
	var logs syncbuf.Buffer
	r, err := outbox.NewRelay(db.DB, outbox.RelayConfig{PollInterval: time.Millisecond,
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		Endpoints: map[string]string{outbox.EventStockRelease: inv.srv.URL, outbox.EventCouponRestore: cpn.srv.URL}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, r.Start(ctx))
	require.Eventually(t, func() bool { return r.Stats().PassErrors >= 61 }, 20*time.Second, 10*time.Millisecond)
	_, err = migrations.Apply(ctx, db.DB.DB) // the database is back
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "outbox relay passes succeed again") },
		10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.Stop(ctx))
	failed := r.Stats().PassErrors
	require.Zero(t, r.Stats().Claimed)
	require.Equal(t, 1+failed/60, strings.Count(logs.String(), "outbox relay pass failed"),
		"%d failed passes; log:\n%s", failed, logs.String())
	require.Contains(t, logs.String(), fmt.Sprintf("failed_passes=%d", failed))
}
