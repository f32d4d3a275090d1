package config_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// The loader's refusals, whole: every problem of a file and environment
// at once, each naming its key (or variable) and value.
func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		want string
	}{
		{"file and environment", "xxl:\n  job:\n    executor:\n      port: 70000\n      appname: ab\n      colour: blue\n",
			map[string]string{"LOG_LEVEL": "loud", "XXL_JOB_ADMIN_TIMEOUT": "soon", "REDIS_MODE": "ring"},
			"config: 6 problem(s):\nline 6: unknown key xxl.job.executor.colour\nxxl.job.admin.timeout (from XXL_JOB_ADMIN_TIMEOUT): \"soon\" is not a duration (e.g. 30s, 2m)\nxxl.job.executor.appname: \"ab\" must be 4-64 characters (the admin's rule)\nxxl.job.executor.port: 70000 is not a port (1-65535)\nredis.mode: \"ring\" is not auto, single, sentinel or cluster\nlog.level: \"loud\" is not debug, info, warn or error"},
		{"timer", "", map[string]string{"DELAY_TIMER": "kafka"},
			"config: 1 problem(s):\ndelay.timer: \"kafka\" is not redis or rabbitmq"},
		{"rabbitmq without a URL", "", map[string]string{"DELAY_TIMER": "rabbitmq"},
			"config: 1 problem(s):\ndelay.rabbitmq.url: \"\" is not amqp://user:password@host:port/vhost (delay.timer is rabbitmq)"},
		{"rabbitmq settings", "", map[string]string{"DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": "http://u:SECRET@mq/",
			"DELAY_RABBITMQ_PREFIX": "a b", "DELAY_RABBITMQ_PREFETCH": "70000", "DELAY_RABBITMQ_REPUBLISH_AFTER": "10ms"},
			"config: 4 problem(s):\ndelay.rabbitmq.url: \"http://u:xxxxx@mq/\" is not amqp://user:password@host:port/vhost (delay.timer is rabbitmq)\ndelay.rabbitmq.prefix: \"a b\" is not 1 to 200 letters, digits, '.', '_', '-'\ndelay.rabbitmq.prefetch: 70000 is outside 1..65535\ndelay.rabbitmq.republishAfter: 10ms is below 1s"},
		{"redis tls off with its settings", "", map[string]string{"REDIS_TLS_CA_FILE": "/ca.pem", "REDIS_TLS_INSECURE_SKIP_VERIFY": "true"},
			"config: 2 problem(s):\nredis.tls.caFile: set, but redis.tls.enabled is false (Redis would be reached without TLS)\nredis.tls.insecureSkipVerify: set, but redis.tls.enabled is false"},
		{"redis tls certificate without key", "", map[string]string{"REDIS_TLS_ENABLED": "true", "REDIS_TLS_CERT_FILE": "/c.pem"},
			"config: 1 problem(s):\nredis.tls.certFile and redis.tls.keyFile: a client certificate needs both (certFile \"/c.pem\", keyFile \"\")"},
		{"double run", "", map[string]string{"DELAY_RUNNING_TIMEOUT": "15s", "DELAY_HANDLER_TIMEOUT": "5s"},
			"config: 1 problem(s):\ndelay.handlerTimeout (5s) + the close path's cancellation bound (14s for order.close.lockTTL 10s) = 19s exceeds 90% of delay.runningTimeout (15s): a close still going after its handler timed out could see its task recovered and run a second time; raise delay.runningTimeout to at least 22s, or lower order.close.lockTTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.LoadWith([]byte(tc.file), envOf(tc.env))
			require.EqualError(t, err, tc.want)
		})
	}
}

// redis.tls.insecureSkipVerify is honoured only when set, and then warned
// about at start.
func TestRedisInsecureSkipVerifyWarns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		warn bool
	}{
		{map[string]string{"REDIS_TLS_ENABLED": "true"}, false},
		{map[string]string{"REDIS_TLS_ENABLED": "true", "REDIS_TLS_INSECURE_SKIP_VERIFY": "true"}, true},
	} {
		c, err := config.LoadWith(nil, envOf(tc.env))
		require.NoError(t, err)
		require.Equal(t, tc.warn, c.Redis.TLS.InsecureSkipVerify)
		warned := false
		for _, n := range c.Notices() {
			if n.Level == slog.LevelWarn && strings.Contains(n.Msg, "redis.tls.insecureSkipVerify is true") {
				warned = true
			}
		}
		require.Equal(t, tc.warn, warned, "%v", tc.env)
	}
}
