package config_test

import (
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

var update = flag.Bool("update", false, "rewrite config/executor.example.yml and the key table of docs/configuration.md")

func noEnv(string) (string, bool) { return "", false }

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsMatchTheDocumentedTable(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWith(nil, noEnv)
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:8080"}, c.XXL.Job.Admin.Addresses, "3.4.1+ admins serve at /")
	require.Equal(t, "", c.XXL.Job.AccessToken)
	require.Equal(t, "order-job-executor", c.XXL.Job.Executor.AppName)
	require.Equal(t, "", c.XXL.Job.Executor.Address)
	require.Equal(t, "", c.XXL.Job.Executor.IP)
	require.Equal(t, 9999, c.XXL.Job.Executor.Port)
	require.Equal(t, "./logs/xxl-job", c.XXL.Job.Executor.LogPath)
	require.Equal(t, 30, c.XXL.Job.Executor.LogRetentionDays)
	require.Equal(t, "root@tcp(127.0.0.1:3306)/test", c.MySQL.DSN)
	require.Equal(t, []string{"127.0.0.1:6379"}, c.Redis.Addr)
	require.Equal(t, "127.0.0.1:9998", c.API.Addr)
	require.Equal(t, "", c.API.Token)
	require.Equal(t, "info", c.Log.Level)
	require.Equal(t, 30, c.Order.Timeout.PaymentTimeoutMinutes)
	require.Equal(t, 7, c.Order.Timeout.FulfillmentTimeoutDays)
	require.Equal(t, 14, c.Order.Timeout.AutoConfirmDays)
}

func TestFileThenEnvironment(t *testing.T) {
	t.Parallel()
	file := `
xxl:
  job:
    admin:
      addresses: http://a:8080/xxl-job-admin,http://b:8080/xxl-job-admin
    accessToken: file-token
    executor:
      appname: shop-orders
      port: 9000
      logRetentionDays: 7      # relaxed spelling, as Spring accepts
mysql.dsn: u:p@tcp(db:3306)/shop   # dotted key, as in application.properties
order:
  timeout:
    auto_confirm_days: 10
`
	c, err := config.LoadWith([]byte(file), envOf(map[string]string{
		"XXL_JOB_EXECUTOR_PORT": "9100",
		"XXL_JOB_ACCESS_TOKEN":  "env-token",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"http://a:8080/xxl-job-admin", "http://b:8080/xxl-job-admin"}, c.XXL.Job.Admin.Addresses)
	require.Equal(t, "env-token", c.XXL.Job.AccessToken, "environment wins over the file")
	require.Equal(t, 9100, c.XXL.Job.Executor.Port)
	require.Equal(t, "shop-orders", c.XXL.Job.Executor.AppName)
	require.Equal(t, 7, c.XXL.Job.Executor.LogRetentionDays)
	require.Equal(t, "u:p@tcp(db:3306)/shop", c.MySQL.DSN)
	require.Equal(t, 10, c.Order.Timeout.AutoConfirmDays)
	require.Equal(t, 30*time.Second, c.XXL.Job.Executor.ShutdownTimeout)
}

func TestEveryProblemIsListed(t *testing.T) {
	t.Parallel()
	file := `
xxl:
  job:
    executor:
      port: 70000
      appname: ab
      colour: blue
`
	_, err := config.LoadWith([]byte(file), envOf(map[string]string{
		"LOG_LEVEL":             "loud",
		"XXL_JOB_ADMIN_TIMEOUT": "soon",
		"REDIS_MODE":            "ring",
	}))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{"unknown key xxl.job.executor.colour", "port: 70000", "appname", "log.level", "XXL_JOB_ADMIN_TIMEOUT", "redis.mode"} {
		require.Contains(t, msg, want)
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWith(nil, envOf(map[string]string{
		"XXL_JOB_ACCESS_TOKEN":   "tok-SECRET-1",
		"EXECUTOR_API_TOKEN":     "tok-SECRET-2",
		"MYSQL_DSN":              "app:pw-SECRET-3@tcp(db:3306)/shop",
		"REDIS_PASSWORD":         "pw-SECRET-4",
		"XXL_JOB_ADMIN_PASSWORD": "pw-SECRET-5",
		"DELAY_SERVICE_TOKEN":    "tok-SECRET-6",
		// Secrets inside URLs: user info and token-like query parameters.
		"XXL_JOB_ADMIN_ADDRESSES":          "http://u:adminpw-SECRET-7@admin:8080/xxl-job-admin",
		"DELAY_SERVICES":                   "orders=http://svc:p4ss-SECRET-8@order-svc:8080",
		"ORDER_PAYMENT_CLOSE_URL":          "https://pay/close?token=SECRET-9",
		"ORDER_COMPENSATION_MODE":          "outbox",
		"ORDER_COMPENSATION_INVENTORY_URL": "http://inv/release?api_key=SECRET-10",
		"ORDER_COMPENSATION_COUPON_URL":    "http://a:SECRET-11@coupon/restore",
		"DELAY_TIMER":                      "rabbitmq",
		"DELAY_RABBITMQ_URL":               "amqp://orders:SECRET-12@mq:5672/orders",
	}))
	require.NoError(t, err)
	var sb strings.Builder
	slog.New(slog.NewJSONHandler(&sb, nil)).Info("start", "config", c)
	require.NotContains(t, sb.String(), "SECRET")
	require.Contains(t, sb.String(), "db:3306", "non-secret parts stay readable")
	require.Contains(t, sb.String(), "order-svc:8080")
	require.Contains(t, sb.String(), "https://pay/close?token=xxxxx")
	require.Contains(t, sb.String(), "mq:5672/orders")
}

// delay.timer picks the timer, redis by default; rabbitmq takes its
// broker's settings.
func TestDelayTimerConfig(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWith(nil, noEnv)
	require.NoError(t, err)
	require.Equal(t, "redis", c.Delay.Timer)
	require.Equal(t, "delay.", c.Delay.RabbitMQ.Prefix)

	c, err = config.LoadWith([]byte("delay:\n  timer: rabbitmq\n  rabbitmq:\n    url: amqp://u:p@mq:5672/shop\n    prefetch: 500\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, 500, c.Delay.RabbitMQ.Prefetch)
	require.Equal(t, 10*time.Second, c.Delay.RabbitMQ.RepublishAfter)

	// Its refusals are in TestLoadRefusals. The RabbitMQ keys are only
	// checked when they are used.
	_, err = config.LoadWith(nil, envOf(map[string]string{"DELAY_RABBITMQ_PREFETCH": "70000"}))
	require.NoError(t, err)
}

// delay.batchSize defaults to the close's page and is checked against the
// dispatcher's bounds.
func TestDelayBatchSize(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWith(nil, noEnv)
	require.NoError(t, err)
	require.Equal(t, 500, c.Delay.BatchSize)
	c, err = config.LoadWith([]byte("delay:\n  batchSize: 200\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, 200, c.Delay.BatchSize)
	for _, v := range []string{"0", "-1", "1001"} {
		_, err = config.LoadWith(nil, envOf(map[string]string{"DELAY_BATCH_SIZE": v}))
		require.ErrorContains(t, err, "delay.batchSize: "+v+" is outside 1..1000")
	}
}

func TestNormalizedDSN(t *testing.T) {
	t.Parallel()
	dsn, err := config.MySQL{DSN: "root@tcp(127.0.0.1:3306)/test", TimeZone: "+08:00"}.NormalizedDSN()
	require.NoError(t, err)
	parsed, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	require.True(t, parsed.ParseTime)
	require.Equal(t, time.UTC, parsed.Loc, "DATETIME values round-trip unchanged")
	require.True(t, parsed.InterpolateParams)
	require.Equal(t, "'+08:00'", parsed.Params["time_zone"])
	require.True(t, parsed.RejectReadOnly, "a read-only answer closes the connection")

	// rejectReadOnly is added only where the DSN does not say.
	for dsn, want := range map[string]bool{
		"root@tcp(127.0.0.1:3306)/test?rejectReadOnly=false":                false,
		"root@tcp(127.0.0.1:3306)/test?parseTime=true&rejectReadOnly=false": false,
		"root@tcp(127.0.0.1:3306)/test?rejectReadOnly=true":                 true,
		"root@tcp(127.0.0.1:3306)/test?parseTime=true":                      true,
		"u:p?rejectReadOnly=false@tcp(127.0.0.1:3306)/test?parseTime=true":  true,
	} {
		out, err := config.MySQL{DSN: dsn}.NormalizedDSN()
		require.NoError(t, err, dsn)
		parsed, err := mysql.ParseDSN(out)
		require.NoError(t, err, dsn)
		require.Equal(t, want, parsed.RejectReadOnly, dsn)
	}
}

// The pool's lifetimes are configurable and bounded.
func TestConnLifetimes(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith(nil, noEnv)
	require.NoError(t, err)
	require.Equal(t, 5*time.Minute, cfg.MySQL.ConnMaxLifetime)
	require.Equal(t, time.Minute, cfg.MySQL.ConnMaxIdleTime)
	cfg, err = config.LoadWith(nil, envOf(map[string]string{"MYSQL_CONN_MAX_LIFETIME": "90s", "MYSQL_CONN_MAX_IDLE_TIME": "20s"}))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.MySQL.ConnMaxLifetime)
	require.Equal(t, 20*time.Second, cfg.MySQL.ConnMaxIdleTime)
	_, err = config.LoadWith(nil, envOf(map[string]string{"MYSQL_CONN_MAX_LIFETIME": "0s"}))
	require.ErrorContains(t, err, "mysql.connMaxLifetime: 0s is outside 1s..24h")
	_, err = config.LoadWith(nil, envOf(map[string]string{"MYSQL_CONN_MAX_IDLE_TIME": "48h"}))
	require.ErrorContains(t, err, "mysql.connMaxIdleTime: 48h0m0s is outside 1s..24h")
}

// The example file documents every key with its default, and loads.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	const path = "executor.example.yml"
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(config.Example()), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, config.Example(), string(got), "run: go test ./config -run TestExampleFile -update")
	_, err = config.LoadWith(got, noEnv)
	require.NoError(t, err)
}

// Timeouts that let a delayed task run twice are refused, naming what to
// change; the loader's figures are the ones the refusal suggests.
func TestDoubleRunTimeoutsRefused(t *testing.T) {
	t.Parallel()
	// Defaults: 60s + (10s + 1s + 3s) = 74s within 108s.
	_, err := config.LoadWith(nil, noEnv)
	require.NoError(t, err)

	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"DELAY_HANDLER_TIMEOUT": "100s"},
			[]string{"delay.handlerTimeout (1m40s) + the close path's cancellation bound (14s for order.close.lockTTL 10s) = 1m54s",
				"delay.runningTimeout (2m0s)", "raise delay.runningTimeout to at least 2m7s", "lower delay.handlerTimeout to at most 1m34s"}},
		{map[string]string{"ORDER_CLOSE_LOCK_TTL": "60s"},
			[]string{"(1m9s for order.close.lockTTL 1m0s)", "at least 2m24s", "at most 39s"}},
		{map[string]string{"DELAY_RUNNING_TIMEOUT": "15s", "DELAY_HANDLER_TIMEOUT": "5s"},
			[]string{"lower order.close.lockTTL"}},
	} {
		_, err := config.LoadWith(nil, envOf(tc.env))
		require.Error(t, err, "%v", tc.env)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "%v", tc.env)
		}
	}
	// What the refusals suggest is accepted.
	for _, env := range []map[string]string{
		{"DELAY_HANDLER_TIMEOUT": "100s", "DELAY_RUNNING_TIMEOUT": "127s"},
		{"DELAY_HANDLER_TIMEOUT": "94s"},
		{"ORDER_CLOSE_LOCK_TTL": "60s", "DELAY_RUNNING_TIMEOUT": "144s"},
	} {
		_, err := config.LoadWith(nil, envOf(env))
		require.NoError(t, err, "%v", env)
	}
}

// An even number of Redlock nodes is refused: 2 need both, 4 need 3.
func TestEvenLockNodesRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nodes string
		want  string
	}{
		{"127.0.0.1:7001,127.0.0.1:7002", "redis.lockNodes: 2 nodes is an even number: a lock needs a majority, 2 of 2"},
		{"a:1,b:1,c:1,d:1", "redis.lockNodes: 4 nodes is an even number: a lock needs a majority, 3 of 4, so 4 nodes survive no more lost nodes than 3 would"},
	} {
		_, err := config.LoadWith(nil, envOf(map[string]string{"REDIS_LOCK_NODES": tc.nodes}))
		require.ErrorContains(t, err, tc.want)
		require.ErrorContains(t, err, "list an odd number (1, 3, 5)")
	}
	for _, nodes := range []string{"a:1", "a:1,b:1,c:1"} {
		_, err := config.LoadWith(nil, envOf(map[string]string{"REDIS_LOCK_NODES": nodes}))
		require.NoError(t, err, nodes)
	}
}
