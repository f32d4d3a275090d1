package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
)

// `executor serve` with the payment step and outbox compensation: the close
// job asks the payment side first, writes events instead of touching local
// stock and coupons, and the relay serve started delivers them.
func TestServeOutboxAndPayment(t *testing.T) {
	ctx := context.Background()
	db, prefix, base, before := seededDB(t, orderdemo.Spec{Orders: 200, SKUs: 30, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1, CouponFraction: 0.5})

	var mu sync.Mutex
	tradeCalls := 0
	events := map[string]int{}
	pay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Payment-Token") != "pay-secret" {
			http.Error(w, "token", http.StatusUnauthorized)
			return
		}
		tradeCalls++
		_, _ = w.Write([]byte(`{"result":"closed"}`))
	}))
	defer pay.Close()
	receive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var body map[string]any
		if r.Header.Get("X-Service-Token") != "svc-secret" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		events[r.Header.Get("Idempotency-Key")]++
		w.WriteHeader(http.StatusOK)
	})
	inv, cpn := httptest.NewServer(receive), httptest.NewServer(receive)
	defer inv.Close()
	defer cpn.Close()

	sv := startServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{
		"EXECUTOR_API_ADDR":                "",
		"DELAY_ENABLED":                    "false",
		"ORDER_PAYMENT_CLOSE_URL":          pay.URL + "/trade/close",
		"ORDER_PAYMENT_TOKEN":              "pay-secret",
		"ORDER_COMPENSATION_MODE":          "outbox",
		"ORDER_COMPENSATION_INVENTORY_URL": inv.URL + "/stock/release",
		"ORDER_COMPENSATION_COUPON_URL":    cpn.URL + "/coupons/restore",
		"ORDER_COMPENSATION_TOKEN":         "svc-secret",
	})
	_, _, cb := sv.closeRun(t, 9101)
	require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
	require.Contains(t, cb.HandleMsg, fmt.Sprintf("closed=%d ", before.Due))

	var want int
	require.NoError(t, db.GetContext(ctx, &want, `SELECT COUNT(*) FROM order_outbox`))
	require.Eventually(t, func() bool {
		var pending int
		return db.GetContext(ctx, &pending, `SELECT COUNT(*) FROM order_outbox WHERE status <> 'done'`) == nil && pending == 0
	}, 30*time.Second, 50*time.Millisecond, "the relay delivered every event")
	mu.Lock()
	require.Equal(t, before.Due, tradeCalls, "one close-trade call per due order")
	require.Len(t, events, want)
	mu.Unlock()
	require.NoError(t, ordertest.CheckOutbox(ctx, db.DB, base, ordertest.OutboxOptions{Delivered: true}))

	sv.shutdown(t)
	for _, secret := range []string{"pay-secret", "svc-secret"} {
		require.NotContains(t, sv.stdout.String()+sv.stderr.String(), secret, "tokens are never logged")
	}
}
