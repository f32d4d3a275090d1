package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkDecodeRegistration is the decode and checks of one POST
// /api/delay-tasks body: an order's close, and a payload near
// delay.MaxPayloadBytes (900 line items, about 55 KiB).
func BenchmarkDecodeRegistration(b *testing.B) {
	items := make([]string, 900)
	for i := range items {
		items[i] = fmt.Sprintf(`{"skuId":%d,"qty":%d,"price":"%d.90"}`, 100000+i, 1+i%3, 10+i%90)
	}
	for _, bc := range []struct {
		name    string
		payload string
	}{
		{"order", `{"orderNo":"202612061234567890","table":"order_info"}`},
		{"payload55KiB", `{"orderNo":"202612061234567890","items":[` + strings.Join(items, ",") + `]}`},
	} {
		body := []byte(`{"bizUuid":"order-close-202612061234567890","handler":"orderTimeoutClose","delayMs":1800000,` +
			`"payload":` + bc.payload + `,"maxRetry":3}`)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/api/delay-tasks", bytes.NewReader(body))
				reg, field, err := decodeRegistration(w, r)
				if err != nil || reg.BizUUID == "" || reg.Payload == nil {
					b.Fatalf("decodeRegistration: %s: %v", field, err)
				}
			}
		})
	}
}
