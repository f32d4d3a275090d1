package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/lifecycle"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/payment"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/sql/migrations"
	"github.com/orderjob/executor/xxljob"
)

// domainDefaults are the defaults of the keys whose behaviour a domain
// package owns, by key path: that package's own default (a constant, or
// its Config's WithDefaults where the package keeps its exported names
// few), written as a `default` tag would write it. A library caller of the package and the
// executor then get the same value from one declaration; walk takes a
// key's default from here when its field has no `default` tag (a test
// rejects a key with both). Defaults that exist only in the executor's
// configuration (ports, addresses, ...) stay in their tags.
var domainDefaults = func() map[string]string {
	own := schema.Default() // the executor's own tables: what the order.schema keys default to
	o, items, stock, coupon := own.Orders, own.Items, own.Stock, own.Coupon
	x := xxljob.Config{}.WithDefaults()
	d, rabbit := delay.Config{}.WithDefaults(), delay.RabbitMQConfig{}.WithDefaults()
	return map[string]string{
		"xxl.job.admin.timeout":                  inUnits(x.HTTPClientTimeout, time.Second),
		"xxl.job.admin.version":                  string(x.AdminVersion),
		"xxl.job.executor.ipExclude":             strings.Join(x.IPExclude, ","),
		"xxl.job.executor.port":                  strconv.Itoa(x.Port),
		"xxl.job.executor.logpath":               x.LogPath,
		"xxl.job.executor.logretentiondays":      strconv.Itoa(x.LogRetentionDays),
		"xxl.job.executor.shutdownTimeout":       inUnits(x.ShutdownTimeout, time.Second),
		"xxl.job.executor.logReadLimit":          strconv.FormatInt(x.LogReadLimit, 10),
		"xxl.job.executor.callbackQueueSize":     strconv.Itoa(x.CallbackQueueSize),
		"mysql.migrationsTable":                  migrations.DefaultTable,
		"order.timeout.fulfillment_timeout_days": strconv.Itoa(lifecycle.DefaultFulfillmentTimeoutDays),
		"order.timeout.auto_confirm_days":        strconv.Itoa(lifecycle.DefaultAutoConfirmDays),
		"order.close.lockTTL":                    inUnits(orderlock.DefaultTTL, time.Second),
		"order.close.pageSize":                   strconv.Itoa(orders.DefaultPageSize),
		"order.close.runRetention":               inUnits(orders.DefaultRunRetention, time.Hour),
		"order.deadLetter.baseBackoff":           inUnits(orders.DefaultDeadLetterBaseBackoff, time.Minute),
		"order.deadLetter.maxBackoff":            inUnits(orders.DefaultDeadLetterMaxBackoff, time.Hour),
		"order.payment.tokenHeader":              payment.DefaultTradeTokenHeader,
		"order.payment.timeout":                  inUnits(payment.DefaultTradeTimeout, time.Second),
		"order.compensation.tokenHeader":         outbox.DefaultTokenHeader,
		"order.schema.scanIndex":                 o.ScanIndex,
		"order.schema.id":                        o.ID,
		"order.schema.orderNo":                   o.OrderNo,
		"order.schema.user":                      o.User,
		"order.schema.status":                    o.Status,
		"order.schema.createTime":                o.CreateTime,
		"order.schema.unpaid":                    o.Unpaid.String(),
		"order.schema.closed":                    o.Closed.String(),
		"order.schema.timeoutColumn":             o.TimeoutColumn,
		"order.schema.closeTime":                 o.CloseTime,
		"order.schema.closeReason":               o.CloseReason,
		"order.schema.timeUnit":                  o.TimeUnit.String(),
		"order.schema.items.table":               items.Table,
		"order.schema.items.index":               items.Index,
		"order.schema.items.orderKey":            itemsOrderKey(items),
		"order.schema.items.orderColumn":         items.OrderColumn,
		"order.schema.items.sku":                 items.SKU,
		"order.schema.items.quantity":            items.Quantity,
		"order.schema.stock.table":               stock.Table,
		"order.schema.stock.key":                 stock.Key,
		"order.schema.stock.index":               stock.Index,
		"order.schema.stock.columns":             stockColumns(stock.Columns),
		"order.schema.coupon.table":              coupon.Table,
		"order.schema.coupon.status":             coupon.Status,
		"order.schema.coupon.used":               coupon.Used.String(),
		"order.schema.coupon.unused":             coupon.Unused.String(),
		"order.schema.coupon.orderColumn":        coupon.OrderColumn,
		"order.schema.coupon.id":                 coupon.ID,
		"order.schema.coupon.orderNo":            coupon.OrderNo,
		"delay.runningTimeout":                   inUnits(d.RunningTimeout, time.Second),
		"delay.handlerTimeout":                   inUnits(d.HandlerTimeout, time.Second),
		"delay.notNowBackoff":                    inUnits(d.NotNowBackoff, time.Second),
		"delay.notNowBackoffMax":                 inUnits(d.NotNowBackoffMax, time.Second),
		"delay.notNowMaxAge":                     inUnits(d.NotNowMaxAge, time.Hour),
		"delay.reconcileInterval":                inUnits(d.ReconcileInterval, time.Second),
		"delay.retention":                        inUnits(d.Retention, time.Hour),
		"delay.batchSize":                        strconv.Itoa(d.BatchSize),
		"delay.keyPrefix":                        d.KeyPrefix,
		"delay.timerShards":                      strconv.Itoa(d.TimerShards),
		"delay.rabbitmq.prefix":                  rabbit.Prefix,
		"delay.rabbitmq.prefetch":                strconv.Itoa(rabbit.Prefetch),
		"delay.rabbitmq.republishAfter":          inUnits(rabbit.RepublishAfter, time.Second),
		"outbox.maxAttempts":                     strconv.Itoa(outbox.DefaultMaxAttempts),
	}
}()

// unitSuffix is how a default writes a duration in each unit the tags used.
var unitSuffix = map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}

// inUnits writes d as a whole number of unit ("120s", "168h"), the way the
// key's tag wrote it before: time.Duration.String would write "2m0s", and
// the generated docs and example file show the text. A d that is not a
// whole number of unit is written as time.Duration.String writes it, which
// loads the same value (and fails the test of the table's texts).
func inUnits(d, unit time.Duration) string {
	suffix, ok := unitSuffix[unit]
	if !ok || d%unit != 0 {
		return d.String()
	}
	return strconv.FormatInt(int64(d/unit), 10) + suffix
}

// itemsOrderKey writes which order key the lines name, as
// order.schema.items.orderKey spells it.
func itemsOrderKey(items schema.Items) string {
	if items.ByID {
		return "id"
	}
	return "orderNo"
}

// stockColumns writes columns as order.schema.stock.columns lists them
// (ParseStockColumn reads each back).
func stockColumns(columns []schema.StockColumn) string {
	parts := make([]string, len(columns))
	for i, c := range columns {
		op := "+="
		if c.Subtract {
			op = "-="
		}
		parts[i] = c.Name + " " + op + " quantity"
	}
	return strings.Join(parts, ",")
}
