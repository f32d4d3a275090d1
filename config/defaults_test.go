package config

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// A key's default is declared once: by its `default` tag, or by the domain
// package whose constant domainDefaults lists, never both; and every entry
// of the table is a key.
func TestDomainDefaultsDeclaredOnce(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	var both []string
	walk(reflect.ValueOf(&Config{}).Elem(), "", func(f field) {
		seen[f.path] = true
		if f.tagged && domainDefaults[f.path] != "" {
			both = append(both, f.path)
		}
	})
	require.Empty(t, both, "keys with a `default` tag and a domain default: drop the tag")
	for path := range domainDefaults {
		require.True(t, seen[path], "domainDefaults names %s, which is not a key", path)
	}
}

// Each domain default reads as its tag read before the table took it over
// (issue 30): the texts show in Keys(), config/executor.example.yml and
// docs/configuration.md, and a domain constant that changes must change
// here too, on purpose.
func TestDomainDefaultsFormatAsTheTagsDid(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"xxl.job.admin.timeout":                  "3s",
		"xxl.job.admin.version":                  "auto",
		"xxl.job.executor.ipExclude":             "docker0,veth*,br-*",
		"xxl.job.executor.port":                  "9999",
		"xxl.job.executor.logpath":               "./logs/xxl-job",
		"xxl.job.executor.logretentiondays":      "30",
		"xxl.job.executor.shutdownTimeout":       "30s",
		"xxl.job.executor.logReadLimit":          "67108864",
		"xxl.job.executor.callbackQueueSize":     "1000",
		"mysql.migrationsTable":                  "order_job_schema_migrations",
		"order.timeout.fulfillment_timeout_days": "7",
		"order.timeout.auto_confirm_days":        "14",
		"order.close.lockTTL":                    "10s",
		"order.close.pageSize":                   "500",
		"order.close.runRetention":               "168h",
		"order.deadLetter.baseBackoff":           "1m",
		"order.deadLetter.maxBackoff":            "6h",
		"order.payment.tokenHeader":              "X-Payment-Token",
		"order.payment.timeout":                  "3s",
		"order.compensation.tokenHeader":         "X-Service-Token",
		"order.schema.scanIndex":                 "idx_status_create_time",
		"order.schema.id":                        "id",
		"order.schema.orderNo":                   "order_no",
		"order.schema.user":                      "user_id",
		"order.schema.status":                    "status",
		"order.schema.createTime":                "create_time",
		"order.schema.unpaid":                    "0",
		"order.schema.closed":                    "2",
		"order.schema.timeoutColumn":             "timeout_minutes",
		"order.schema.closeTime":                 "close_time",
		"order.schema.closeReason":               "close_reason",
		"order.schema.timeUnit":                  "datetime",
		"order.schema.items.table":               "order_item",
		"order.schema.items.index":               "idx_order_no",
		"order.schema.items.orderKey":            "orderNo",
		"order.schema.items.orderColumn":         "order_no",
		"order.schema.items.sku":                 "sku_id",
		"order.schema.items.quantity":            "quantity",
		"order.schema.stock.table":               "inventory",
		"order.schema.stock.key":                 "sku_id",
		"order.schema.stock.index":               "PRIMARY",
		"order.schema.stock.columns":             "available += quantity,locked -= quantity",
		"order.schema.coupon.table":              "user_coupon",
		"order.schema.coupon.status":             "status",
		"order.schema.coupon.used":               "1",
		"order.schema.coupon.unused":             "0",
		"order.schema.coupon.orderColumn":        "coupon_id",
		"order.schema.coupon.id":                 "id",
		"order.schema.coupon.orderNo":            "order_no",
		"delay.runningTimeout":                   "120s",
		"delay.handlerTimeout":                   "60s",
		"delay.notNowBackoff":                    "1s",
		"delay.notNowBackoffMax":                 "30s",
		"delay.notNowMaxAge":                     "1h",
		"delay.reconcileInterval":                "30s",
		"delay.retention":                        "168h",
		"delay.batchSize":                        "500",
		"delay.keyPrefix":                        "delay:",
		"delay.timerShards":                      "1",
		"delay.rabbitmq.prefix":                  "delay.",
		"delay.rabbitmq.prefetch":                "10000",
		"delay.rabbitmq.republishAfter":          "10s",
		"outbox.maxAttempts":                     "20",
	}
	require.Equal(t, want, domainDefaults)
}
