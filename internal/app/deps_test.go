package app

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// The process log writes durations as text, in both formats, and masks the
// secrets of URLs in the start-up configuration line.
func TestProcessLogDurationsAndURLs(t *testing.T) {
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
		v, ok := map[string]string{
			"XXL_JOB_ADMIN_ADDRESSES": "http://u:adminpw@admin:8080/xxl-job-admin",
			"DELAY_SERVICES":          "orders=http://svc:p4ss@svc:8080",
			"ORDER_PAYMENT_CLOSE_URL": "https://pay/close?token=SECRET123",
			"REDIS_SENTINEL_PASSWORD": "sentinelpw",
		}[k]
		return v, ok
	})
	require.NoError(t, err)
	for _, format := range []string{"json", "text"} {
		cfg.Log.Format = format
		var buf bytes.Buffer
		log := NewLogger(cfg, &buf)
		log.Info("tick", "interval", 30*time.Second, "config", cfg)
		out := buf.String()
		require.Contains(t, out, "30s", format)
		require.NotContains(t, out, "30000000000", format)
		for _, secret := range []string{"adminpw", "p4ss", "SECRET123", "sentinelpw"} {
			require.NotContains(t, out, secret, format)
		}
		require.Contains(t, out, "admin:8080", format)
	}
}
