package config_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
		{"typos of keys", "order:\n  close:\n    lockKeyPrefx: x\n  schema:\n    table: t\n    item: {table: t_item}\nredis:\n  adr: r:6379\nmysq:\n  dsn: x\n", nil,
			"config: 4 problem(s):\nline 3: unknown key order.close.lockKeyPrefx; did you mean order.close.lockKeyPrefix?\n" +
				"line 6: unknown key order.schema.item; did you mean order.schema.items?\nline 8: unknown key redis.adr; did you mean redis.addr?\n" +
				"line 9: unknown key mysq; did you mean mysql?"},
		{"timer shards", "", map[string]string{"DELAY_TIMER_SHARDS": "65"},
			"config: 1 problem(s):\ndelay.timerShards: 65 is outside 1..64"},
		{"timer shards under a hash tag", "delay:\n  keyPrefix: '{shop}:delay:'\n  timerShards: 4\n", nil,
			"config: 1 problem(s):\ndelay.keyPrefix: \"{shop}:delay:\" holds '{' or '}', whose hash tag would put all 4 timer shards (delay.timerShards) in one Redis Cluster slot"},
		{"one timer shard under a hash tag", "delay:\n  keyPrefix: '{shop}:delay:'\n", nil, ""},
		{"timer", "", map[string]string{"DELAY_TIMER": "kafka"},
			"config: 1 problem(s):\ndelay.timer: \"kafka\" is not redis or rabbitmq"},
		{"rabbitmq without a URL", "", map[string]string{"DELAY_TIMER": "rabbitmq"},
			"config: 1 problem(s):\ndelay.rabbitmq.url: \"\" is not amqp://user:password@host:port/vhost (delay.timer is rabbitmq)"},
		{"rabbitmq settings", "", map[string]string{"DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": "http://u:SECRET@mq/",
			"DELAY_RABBITMQ_PREFIX": "a b", "DELAY_RABBITMQ_PREFETCH": "70000", "DELAY_RABBITMQ_REPUBLISH_AFTER": "10ms"},
			"config: 4 problem(s):\ndelay.rabbitmq.url: \"http://u:xxxxx@mq/\" is not amqp://user:password@host:port/vhost (delay.timer is rabbitmq)\ndelay.rabbitmq.prefix: \"a b\" is not 1 to 200 letters, digits, '.', '_', '-'\ndelay.rabbitmq.prefetch: 70000 is outside 1..65535\ndelay.rabbitmq.republishAfter: 10ms is below 1s"},
		{"rabbitmq names of a source too long", "", map[string]string{"DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": "amqp://mq/",
			"DELAY_RABBITMQ_PREFIX": strings.Repeat("p", 160), "ORDER_SOURCES": "[{name: " + strings.Repeat("n", 40) + ", dsn: 'u@tcp(h:3306)/d', tables: order_info}]"},
			"config: 1 problem(s):\ndelay.rabbitmq.prefix: \"" + strings.Repeat("p", 160) + "\" with order source " + strings.Repeat("n", 40) + "'s part (source." + strings.Repeat("n", 40) + ".) is 208 characters, over 200"},
		{"redis tls off with its settings", "", map[string]string{"REDIS_TLS_CA_FILE": "/ca.pem", "REDIS_TLS_INSECURE_SKIP_VERIFY": "true"},
			"config: 2 problem(s):\nredis.tls.caFile: set, but redis.tls.enabled is false (Redis would be reached without TLS)\nredis.tls.insecureSkipVerify: set, but redis.tls.enabled is false"},
		{"redis tls certificate without key", "", map[string]string{"REDIS_TLS_ENABLED": "true", "REDIS_TLS_CERT_FILE": "/c.pem"},
			"config: 1 problem(s):\nredis.tls.certFile and redis.tls.keyFile: a client certificate needs both (certFile \"/c.pem\", keyFile \"\")"},
		{"double run", "", map[string]string{"DELAY_RUNNING_TIMEOUT": "15s", "DELAY_HANDLER_TIMEOUT": "5s"},
			"config: 1 problem(s):\ndelay.handlerTimeout (5s) + the close path's cancellation bound (14s for order.close.lockTTL 10s) = 19s exceeds 90% of delay.runningTimeout (15s): a close still going after its handler timed out could see its task recovered and run a second time; raise delay.runningTimeout to at least 22s, or lower order.close.lockTTL"},
		{"short tokens", "xxl.job.accessToken: default_token\n", map[string]string{"EXECUTOR_API_TOKEN": "x",
			"EXECUTOR_API_CONSOLE_TOKENS": "alice:0123456789abcde"},
			"config: 3 problem(s):\nxxl.job.accessToken: shorter than 16 characters (the admin's default_token and other short tokens are guessed; use a long random one on both sides)\napi.token: shorter than 16 characters\napi.consoleTokens: the token of \"alice\" is shorter than 16 characters"},
		// Every statement names its tables without a database: before,
		// such a DSN started and failed each query with Error 1046.
		{"DSN without a database", "", map[string]string{"MYSQL_DSN": "u:SECRET@tcp(db:3306)/?parseTime=true",
			"ORDER_SOURCES": "[{name: a, dsn: 'u:SECRET@tcp(h:3306)/', tables: order_info}]"},
			"config: 2 problem(s):\nmysql.dsn: names no database: end it with the database's name (user:pass@tcp(host:port)/shop)\n" +
				"order.sources item 1 (a): dsn: names no database: end it with the database's name (user:pass@tcp(host:port)/shop)"},
		{"tokens of 16", "xxl.job.accessToken: 0123456789abcdef\n", map[string]string{"EXECUTOR_API_TOKEN": "0123456789abcdeF",
			"EXECUTOR_API_CONSOLE_TOKENS": "alice:0123456789abcdEF"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				_, err := config.LoadWith([]byte(tc.file), envOf(tc.env))
				require.NoError(t, err)
				return
			}
			_, err := config.LoadWith([]byte(tc.file), envOf(tc.env))
			require.EqualError(t, err, tc.want)
		})
	}
}

// A key the file gives twice, a section written twice, or a key set both
// nested and dotted is refused with its path and both lines: before, the
// last one silently won.
func TestLoadRefusesRepeatedKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, want string
	}{
		{"repeated key", "redis:\n  db: 1\n  db: 2\n",
			"app.yml:3: redis.db is given twice (lines 2 and 3): keep one"},
		{"repeated top-level dotted key", "redis.db: 1\nlog.level: info\nredis.db: 2\n",
			"app.yml:3: redis.db is given twice (lines 1 and 3): keep one"},
		{"repeated section", "redis:\n  addr: a:6379\nlog:\n  level: info\nredis:\n  addr: b:6379\n",
			"app.yml:5: redis is given twice (lines 1 and 5): keep one"},
		{"repeated section, other keys", "redis:\n  addr: a:6379\nredis:\n  db: 2\n",
			"app.yml:3: redis is given twice (lines 1 and 3): keep one"},
		{"nested then dotted", "redis:\n  db: 1\nredis.db: 2\n",
			"app.yml:3: redis.db (line 2) and redis.db (line 3) are the same key: keep one of them"},
		{"dotted then nested", "xxl.job.executor.port: 9998\nxxl:\n  job:\n    executor:\n      port: 9999\n",
			"app.yml:5: xxl.job.executor.port (line 1) and xxl.job.executor.port (line 5) are the same key: keep one of them"},
		{"half dotted", "xxl.job:\n  executor:\n    port: 9998\nxxl:\n  job.executor.port: 9999\n",
			"app.yml:5: xxl.job.executor.port (line 3) and xxl.job.executor.port (line 5) are the same key: keep one of them"},
		{"relaxed spellings", "xxl.job.executor:\n  logretentiondays: 3\n  log-retention-days: 4\n",
			"app.yml:3: xxl.job.executor.log-retention-days is given twice (lines 2 and 3): keep one"},
		{"same value twice", "redis:\n  db: 1\nredis.db: 1\n",
			"app.yml:3: redis.db (line 2) and redis.db (line 3) are the same key: keep one of them"},
		{"ignored Spring section twice", "server:\n  port: 8081\nserver:\n  port: 8082\n",
			"app.yml:3: server is given twice (lines 1 and 3): keep one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.LoadFileWith("app.yml", []byte(tc.file), noEnv)
			require.EqualError(t, err, "config: 1 problem(s):\n"+tc.want)
		})
	}
	// Sections spelt nested and dotted still merge when their keys differ.
	c, err := config.LoadFileWith("app.yml", []byte("xxl.job.executor.port: 9998\nxxl:\n  job:\n    executor:\n      appname: merged-app\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, 9998, c.XXL.Job.Executor.Port)
	require.Equal(t, "merged-app", c.XXL.Job.Executor.AppName)
}

// redis.db below 0 used to select database 0 silently; a Cluster has only
// database 0. The upper bound is the server's, checked at start
// (internal/app).
func TestLoadRefusesRedisDB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"REDIS_DB": "-1"}, "redis.db: -1 is not a database number (0 or more; the server's `databases` setting is the upper bound, checked at start)"},
		{map[string]string{"REDIS_DB": "2", "REDIS_MODE": "cluster"}, "redis.db: 2, but a Redis Cluster has only database 0"},
		{map[string]string{"REDIS_DB": "2", "REDIS_ADDR": "a:7000,b:7001"}, "redis.db: 2, but a Redis Cluster has only database 0"},
		{map[string]string{"REDIS_DB": "2", "REDIS_ADDR": "a:26379,b:26379", "REDIS_MASTER_NAME": "m"}, ""},
		{map[string]string{"REDIS_DB": "15"}, ""},
	} {
		_, err := config.LoadWith(nil, envOf(tc.env))
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.env)
			continue
		}
		require.EqualError(t, err, "config: 1 problem(s):\n"+tc.want, "%v", tc.env)
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

// Each problem is one line: a newline or a terminal escape in a key or a
// value is written as its Go escape. Before, a quoted YAML key holding a
// newline broke its problem into lines that read as problems of their own.
func TestLoadProblemsAreOneLineEach(t *testing.T) {
	t.Parallel()
	_, err := config.LoadFileWith("app.yml", []byte("\"a\\nlog.level: bad\": 1\n\"\\e[2J\": 2\n"), envOf(map[string]string{
		"ORDER_SOURCES": "[{name: \"x\\ny\", dsn: 'u:p@tcp(h:3306)/d', tables: order_info}]"}))
	require.EqualError(t, err, "config: 3 problem(s):\n"+
		"app.yml:1: unknown key a\\nlog.level: bad\n"+
		"app.yml:2: unknown key \\x1b[2J\n"+
		"order.sources item 1 (x\\ny): name: \"x\\ny\" is not 1-64 letters, digits, '_', '.' or '-'")
}

// Bare seconds beyond what a duration holds are refused: before,
// 18446744074 wrapped round to 290ms and loaded as it.
func TestLoadRefusesSecondsOutOfRange(t *testing.T) {
	t.Parallel()
	_, err := config.LoadWith([]byte("xxl.job.admin.timeout: 18446744074\n"), envOf(map[string]string{
		"MYSQL_CONN_MAX_LIFETIME": "-99999999999999999999",
		"ORDER_SOURCES":           "[{name: a, dsn: 'u:p@tcp(h:3306)/d', tables: order_info, connMaxIdleTime: 9223372037}]"}))
	require.EqualError(t, err, "config: 3 problem(s):\n"+
		"line 1: xxl.job.admin.timeout: \"18446744074\" seconds is out of range (at most 9223372036)\n"+
		"mysql.connMaxLifetime (from MYSQL_CONN_MAX_LIFETIME): \"-99999999999999999999\" seconds is out of range (at most 9223372036)\n"+
		"order.sources (from ORDER_SOURCES): item 1 (line 1): connMaxIdleTime: \"9223372037\" seconds is out of range (at most 9223372036)")
	c, err := config.LoadWith([]byte("xxl.job.admin.timeout: 60\nmysql.connMaxLifetime: 86400\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.XXL.Job.Admin.Timeout)
	require.Equal(t, 24*time.Hour, c.MySQL.ConnMaxLifetime)
}

// A file of many unknown keys (the wrong file given) is refused at a cost
// that grows with the file, not with the file times every known key: each
// unknown key's suggestion used to build its string replacers anew for
// every known key, some 2,500 allocations a key, and a 90 KB file took
// tens of seconds. Not run in parallel: AllocsPerRun counts the process's
// allocations.
func TestLoadRefusesManyUnknownKeysCheaply(t *testing.T) {
	load := func(n int) float64 {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "order.k%d: 1\n", i)
		}
		return testing.AllocsPerRun(3, func() {
			_, err := config.LoadWith([]byte(b.String()), noEnv)
			if n > 0 {
				require.ErrorContains(t, err, fmt.Sprintf("config: %d problem(s)", n))
			}
		})
	}
	perKey := (load(200) - load(0)) / 200
	require.Less(t, perKey, 200.0, "allocations per unknown key")
}

// An error lists the first hundred problems and counts the rest: a file
// reusing one wrong mapping under many sections (YAML aliases) made an
// error of 14,001 lines, 876 KB, out of 6 KB.
func TestLoadListsAHundredProblems(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 150 {
		fmt.Fprintf(&b, "order.k%03d: 1\n", i)
	}
	_, err := config.LoadWith([]byte(b.String()), noEnv)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Equal(t, "config: 150 problem(s):", lines[0])
	require.Len(t, lines, 1+100+1)
	require.Equal(t, "line 100: unknown key order.k099", lines[100])
	require.Equal(t, "... and 50 more problem(s)", lines[101])
}
