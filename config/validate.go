package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/orderjob/executor/internal/redact"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/xxljob"
)

// validate returns every problem of c, in the order of the sections of
// the file.
func (c *Config) validate() []error {
	var p []error
	bad := badFunc(func(err error) { p = append(p, err) })
	c.adminProblems(bad)
	c.executorProblems(bad)
	c.mysqlProblems(bad)
	c.redisProblems(bad)
	c.apiAndLogProblems(bad)
	c.orderProblems(bad)
	if n := c.Outbox.MaxAttempts; n < 1 && n != -1 {
		bad.f("outbox.maxAttempts: %d must be at least 1, or -1 for no limit", n)
	}
	c.delayProblems(bad)
	return p
}

// badFunc collects a problem; its methods format one or add a list.
type badFunc func(error)

func (bad badFunc) f(format string, args ...any) { bad(fmt.Errorf(format, args...)) }

func (bad badFunc) all(errs []error) {
	for _, err := range errs {
		bad(err)
	}
}

// adminProblems checks xxl.job.admin and the access token.
func (c *Config) adminProblems(bad badFunc) {
	if len(c.XXL.Job.Admin.Addresses) == 0 {
		bad.f("xxl.job.admin.addresses: at least one admin address is needed")
	}
	for _, a := range c.XXL.Job.Admin.Addresses {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad.f("xxl.job.admin.addresses: %q is not an http(s) URL", redact.URL(a))
		}
	}
	if d := c.XXL.Job.Admin.Timeout; d <= 0 || d > time.Minute {
		bad.f("xxl.job.admin.timeout: %s is outside 1ms..1m", d)
	}
	if _, err := xxljob.ParseAdminVersion(c.XXL.Job.Admin.Version); err != nil {
		bad.f("xxl.job.admin.version: %v", err)
	}
	if t := c.XXL.Job.AccessToken; t != "" && len(t) < MinTokenLength {
		bad.f("xxl.job.accessToken: shorter than %d characters (the admin's default_token and other short tokens are guessed; use a long random one on both sides)", MinTokenLength)
	}
	if c.XXL.Job.Admin.Version == string(xxljob.AdminMain) && c.XXL.Job.AccessToken == "" {
		bad.f("xxl.job.accessToken: the main admin (the branch after 3.4) needs the executor group's token")
	}
}

// executorProblems checks xxl.job.executor.
func (c *Config) executorProblems(bad badFunc) {
	ex := c.XXL.Job.Executor
	if n := len(ex.AppName); n < 4 || n > 64 {
		bad.f("xxl.job.executor.appname: %q must be 4-64 characters (the admin's rule)", ex.AppName)
	}
	if ex.Address != "" {
		if u, err := url.Parse(ex.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad.f("xxl.job.executor.address: %q is not an http(s) URL", redact.URL(ex.Address))
		}
	}
	if ex.Port < 1 || ex.Port > 65535 {
		bad.f("xxl.job.executor.port: %d is not a port (1-65535)", ex.Port)
	}
	if ex.BindAddr != "" {
		if err := xxljob.CheckListenAddr(context.Background(), ex.BindAddr); err != nil {
			bad.f("xxl.job.executor.bindAddr: %v", err)
		}
	}
	if ex.LogPath == "" {
		bad.f("xxl.job.executor.logpath: must not be empty")
	}
	if ex.LogRetentionDays < 0 {
		bad.f("xxl.job.executor.logretentiondays: %d is negative", ex.LogRetentionDays)
	}
	if ex.ShutdownTimeout < 0 {
		bad.f("xxl.job.executor.shutdownTimeout: %s is negative", ex.ShutdownTimeout)
	}
	if ex.LogReadLimit < 1<<10 {
		bad.f("xxl.job.executor.logReadLimit: %d is below 1024 bytes", ex.LogReadLimit)
	}
	if ex.CallbackQueueSize < 1 {
		bad.f("xxl.job.executor.callbackQueueSize: %d must be at least 1", ex.CallbackQueueSize)
	}
	for _, pat := range ex.IPExclude {
		if _, err := path.Match(pat, ""); err != nil {
			bad.f("xxl.job.executor.ipExclude: bad pattern %q", pat)
		}
	}
}

// mysqlProblems checks mysql.
func (c *Config) mysqlProblems(bad badFunc) {
	if err := c.MySQL.checkDSN(); err != nil {
		bad.f("mysql.dsn: %v", err)
	}
	if !sqlIdent.MatchString(c.MySQL.MigrationsTable) {
		bad.f("mysql.migrationsTable: %q is not a table name (letters, digits and _, at most 64)", c.MySQL.MigrationsTable)
	}
	if c.MySQL.MaxOpenConns < 1 {
		bad.f("mysql.maxOpenConns: %d must be at least 1", c.MySQL.MaxOpenConns)
	}
	if d := c.MySQL.ConnMaxLifetime; d < time.Second || d > 24*time.Hour {
		bad.f("mysql.connMaxLifetime: %s is outside 1s..24h", d)
	}
	if d := c.MySQL.ConnMaxIdleTime; d < time.Second || d > 24*time.Hour {
		bad.f("mysql.connMaxIdleTime: %s is outside 1s..24h", d)
	}
}

// redisProblems checks redis, its TLS apart.
func (c *Config) redisProblems(bad badFunc) {
	if len(c.Redis.Addr) == 0 {
		bad.f("redis.addr: at least one address is needed")
	}
	switch c.Redis.Mode {
	case "auto", "single", "cluster":
	case "sentinel":
		if c.Redis.MasterName == "" {
			bad.f("redis.masterName: needed in sentinel mode")
		}
	default:
		bad.f("redis.mode: %q is not auto, single, sentinel or cluster", c.Redis.Mode)
	}
	if n := len(c.Redis.LockNodes); n > 0 && n%2 == 0 {
		bad.f("redis.lockNodes: %d nodes is an even number: a lock needs a majority, %d of %d, so %d nodes survive no more lost nodes than %d would (2 nodes survive none, less available than 1); list an odd number (1, 3, 5)",
			n, n/2+1, n, n, n-1)
	}
	if c.Redis.DB < 0 {
		bad.f("redis.db: %d is not a database number (0 or more; the server's `databases` setting is the upper bound, checked at start)", c.Redis.DB)
	}
	if cluster := c.Redis.Mode == "cluster" || (c.Redis.Mode == "auto" && c.Redis.MasterName == "" && len(c.Redis.Addr) > 1); cluster && c.Redis.DB > 0 {
		bad.f("redis.db: %d, but a Redis Cluster has only database 0", c.Redis.DB)
	}
}

// apiAndLogProblems checks api.token, redis.tls, the rest of api and log.
func (c *Config) apiAndLogProblems(bad badFunc) {
	if t := c.API.Token; t != "" && len(t) < MinTokenLength {
		bad.f("api.token: shorter than %d characters", MinTokenLength)
	}
	bad.all(c.Redis.TLS.problems())
	if c.API.TokenHeader == "" {
		bad.f("api.tokenHeader: must not be empty")
	}
	bad.all(c.API.consoleProblems())
	if _, err := ParseLevel(c.Log.Level); err != nil {
		bad.f("log.level: %v", err)
	}
	if c.Log.Format != "auto" && c.Log.Format != "json" && c.Log.Format != "text" {
		bad.f("log.format: %q is not auto, json or text", c.Log.Format)
	}
}

// orderProblems checks order, its schema and sources.
func (c *Config) orderProblems(bad badFunc) {
	t := c.Order.Timeout
	if t.PaymentTimeoutMinutes < 1 {
		bad.f("order.timeout.payment_timeout_minutes: %d must be at least 1", t.PaymentTimeoutMinutes)
	}
	if t.FulfillmentTimeoutDays < 1 {
		bad.f("order.timeout.fulfillment_timeout_days: %d must be at least 1", t.FulfillmentTimeoutDays)
	}
	if t.AutoConfirmDays < 1 {
		bad.f("order.timeout.auto_confirm_days: %d must be at least 1", t.AutoConfirmDays)
	}
	if c.Order.Close.LockTTL < time.Second {
		bad.f("order.close.lockTTL: %s is below 1s", c.Order.Close.LockTTL)
	}
	if r := c.Order.Close.RunRetention; r < time.Hour {
		bad.f("order.close.runRetention: %s is below 1h", r)
	}
	if ps := c.Order.Close.PageSize; ps < 1 || ps > 5000 {
		bad.f("order.close.pageSize: %d is outside 1..5000", ps)
	}
	if c.Order.DeadLetter.MaxAttempts < 1 {
		bad.f("order.deadLetter.maxAttempts: %d must be at least 1", c.Order.DeadLetter.MaxAttempts)
	}
	if b := c.Order.DeadLetter; b.BaseBackoff <= 0 || b.MaxBackoff < b.BaseBackoff {
		bad.f("order.deadLetter: baseBackoff (%s) must be positive and at most maxBackoff (%s)", b.BaseBackoff, b.MaxBackoff)
	}
	if u := c.Order.Payment.CloseURL; u != "" && !isHTTPURL(u) {
		bad.f("order.payment.closeURL: %q is not an http(s) URL", redact.URL(u))
	}
	if c.Order.Payment.Timeout <= 0 || c.Order.Payment.Retries < 0 {
		bad.f("order.payment: timeout must be positive and retries not negative")
	}
	switch cm := c.Order.Compensation; cm.Mode {
	case "local":
	case "outbox":
		if !isHTTPURL(cm.InventoryURL) || !isHTTPURL(cm.CouponURL) {
			bad.f("order.compensation: outbox mode needs http(s) inventoryURL and couponURL")
		}
	default:
		bad.f("order.compensation.mode: %q is not local or outbox", cm.Mode)
	}
	sch, err := c.Order.Schema.Schema()
	if err != nil {
		for _, e := range flatten(err) {
			bad.f("order.schema.%v", e)
		}
	} else if sch.Orders.TimeUnit.Epoch() {
		c.epochLocProblems(bad, sch.Orders.TimeUnit)
	}
	if err == nil && len(c.Order.Sources) > 0 {
		if _, err := c.Sources(); err != nil {
			for _, e := range flatten(err) {
				bad.f("%v", e)
			}
		}
	}
}

// delayProblems checks delay.
func (c *Config) delayProblems(bad badFunc) {
	d := c.Delay
	if d.RunningTimeout <= 0 || d.HandlerTimeout <= 0 {
		bad.f("delay.handlerTimeout (%s) and delay.runningTimeout (%s) must be positive", d.HandlerTimeout, d.RunningTimeout)
	} else if c.Order.Close.LockTTL >= time.Second {
		bad.all(checkDoubleRun(d.HandlerTimeout, c.Order.Close.LockTTL, d.RunningTimeout))
	}
	if d.NotNowBackoff <= 0 || d.NotNowBackoffMax < d.NotNowBackoff {
		bad.f("delay.notNowBackoff (%s) must be positive and at most delay.notNowBackoffMax (%s)", d.NotNowBackoff, d.NotNowBackoffMax)
	}
	if d.NotNowMaxAge <= 0 {
		bad.f("delay.notNowMaxAge: %s must be positive", d.NotNowMaxAge)
	}
	if d.ReconcileInterval <= 0 {
		bad.f("delay.reconcileInterval: %s must be positive", d.ReconcileInterval)
	}
	if d.BatchSize < 1 || d.BatchSize > 1000 {
		bad.f("delay.batchSize: %d is outside 1..1000", d.BatchSize)
	}
	if d.TimerShards < 1 || d.TimerShards > 64 {
		bad.f("delay.timerShards: %d is outside 1..64", d.TimerShards)
	} else if d.TimerShards > 1 && strings.ContainsAny(d.KeyPrefix, "{}") {
		bad.f("delay.keyPrefix: %q holds '{' or '}', whose hash tag would put all %d timer shards (delay.timerShards) in one Redis Cluster slot", d.KeyPrefix, d.TimerShards)
	}
	switch d.Timer {
	case "redis":
	case "rabbitmq":
		c.rabbitMQProblems(bad)
	default:
		bad.f("delay.timer: %q is not redis or rabbitmq", d.Timer)
	}
	for _, s := range d.Services {
		name, base, ok := strings.Cut(s, "=")
		if u, err := url.Parse(base); !ok || name == "" || err != nil || u.Host == "" {
			bad.f("delay.services: %q is not name=http://host/base", redact.Named([]string{s})[0])
		}
	}
}

// rabbitMQProblems checks delay.rabbitmq (delay.timer is rabbitmq).
func (c *Config) rabbitMQProblems(bad badFunc) {
	r := c.Delay.RabbitMQ
	if u, err := url.Parse(r.URL); r.URL == "" || err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
		bad.f("delay.rabbitmq.url: %q is not amqp://user:password@host:port/vhost (delay.timer is rabbitmq)", redact.URL(r.URL))
	}
	if !rabbitPrefixRe.MatchString(r.Prefix) {
		bad.f("delay.rabbitmq.prefix: %q is not 1 to 200 letters, digits, '.', '_', '-'", r.Prefix)
	}
	// The tasks of a source's database hop through queues named
	// {prefix}source.{name}. (delay.SourceRabbitMQPrefix).
	for _, src := range c.Order.Sources {
		if n := len(r.Prefix) + len("source.") + len(src.Name) + 1; n > 200 && rabbitPrefixRe.MatchString(r.Prefix) {
			bad.f("delay.rabbitmq.prefix: %q with order source %s's part (source.%s.) is %d characters, over 200", r.Prefix, src.Name, src.Name, n)
		}
	}
	if r.Prefetch < 1 || r.Prefetch > 65535 {
		bad.f("delay.rabbitmq.prefetch: %d is outside 1..65535", r.Prefetch)
	}
	if r.RepublishAfter < time.Second {
		bad.f("delay.rabbitmq.republishAfter: %s is below 1s", r.RepublishAfter)
	}
}

// rabbitPrefixRe keeps every name under the prefix within RabbitMQ's 255
// bytes (the same rule as the delay package's).
var rabbitPrefixRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// ParseLevel turns a level name into a slog level.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

var sqlIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// NormalizedDSN returns the DSN with what the executor needs (DriverConfig).
func (m MySQL) NormalizedDSN() (string, error) {
	cfg, err := m.DriverConfig()
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// DriverConfig is the DSN parsed, with what the executor needs: parseTime,
// loc (UTC when unset: DATETIME values then round-trip unchanged, whatever
// zone they mean) and, when TimeZone is set, the session time_zone.
func (m MySQL) DriverConfig() (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		return nil, errors.New("cannot parse the DSN (user:pass@tcp(host:port)/db?params)")
	}
	cfg.ParseTime = true
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	// One round trip per statement instead of prepare+execute+close.
	cfg.InterpolateParams = true
	// A read-only answer (1290, 1792, 1836: a replica, or the old primary
	// after a failover) closes that connection, so the pool does not keep
	// reusing it; a DSN that sets rejectReadOnly itself keeps its choice.
	if !dsnSets(m.DSN, "rejectReadOnly") {
		cfg.RejectReadOnly = true
	}
	if m.TimeZone != "" {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["time_zone"] = "'" + strings.Trim(m.TimeZone, "'") + "'"
	}
	return cfg, nil
}

// checkDSN reports what keeps the DSN from serving the executor. Beyond
// DriverConfig's parse, it must name a database: every statement names
// its tables without one, so a DSN without would start and then fail each
// query with "Error 1046: No database selected". (migrate -create-database
// opens the server alone through DriverConfig, which allows that.)
func (m MySQL) checkDSN() error {
	cfg, err := m.DriverConfig()
	if err != nil {
		return err
	}
	if cfg.DBName == "" {
		return errors.New("names no database: end it with the database's name (user:pass@tcp(host:port)/shop)")
	}
	return nil
}

// dsnSets reports whether the DSN's query string names param. The query
// follows the last '/' (the driver's rule: a password may hold a '?').
func dsnSets(dsn, param string) bool {
	_, query, ok := strings.Cut(dsn[strings.LastIndexByte(dsn, '/')+1:], "?")
	if !ok {
		return false
	}
	for kv := range strings.SplitSeq(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == param {
			return true
		}
	}
	return false
}

// LogValue renders the configuration for the process log with every secret
// replaced, so the whole struct can be logged at start.
func (c *Config) LogValue() slog.Value {
	var attrs []slog.Attr
	walk(reflect.ValueOf(c).Elem(), "", func(f field) {
		val := fmt.Sprint(f.v.Interface())
		switch {
		case f.redact == "url" && f.v.Kind() == reflect.Slice:
			val = fmt.Sprint(redact.URLs(f.v.Interface().([]string)))
		case f.redact == "url":
			val = redact.URL(f.v.String())
		case f.redact == "named":
			val = fmt.Sprint(redact.Named(f.v.Interface().([]string)))
		}
		if f.secret {
			if f.path == "mysql.dsn" {
				val = redactDSN(f.v.String())
			} else if val != "" {
				val = "[redacted]"
			}
		}
		attrs = append(attrs, slog.String(f.path, val))
	})
	return slog.GroupValue(attrs...)
}

func redactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "[unparseable]"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}

// Notice is a remark on the configuration that the executor logs at start.
type Notice struct {
	Level slog.Level
	Msg   string
}

// Notices are the remarks on what a Java executor's configuration sets that
// works differently here: the XXL-JOB side switched off, keys accepted and
// ignored, Spring Boot keys skipped.
func (c *Config) Notices() []Notice {
	var n []Notice
	ex := c.XXL.Job.Executor
	if !ex.Enabled {
		n = append(n, Notice{slog.LevelInfo, "xxl.job.executor.enabled is false: no XXL-JOB protocol server and no registration with the admin; the API port and the delayed-task dispatcher still run"})
	}
	if ex.ExcludedPackage != "" {
		n = append(n, Notice{slog.LevelInfo, "xxl.job.executor.excludedpackage is ignored: handlers are compiled into this executor, there is no package scan"})
	}
	if ex.GlueEnabled {
		n = append(n, Notice{slog.LevelWarn, "xxl.job.executor.glueenabled is true, but this executor always refuses GLUE (script) jobs: only its compiled-in handlers run"})
	}
	if c.Redis.TLS.Enabled && c.Redis.TLS.InsecureSkipVerify {
		n = append(n, Notice{slog.LevelWarn, "redis.tls.insecureSkipVerify is true: Redis server certificates are not checked, anyone on the path can read and change what the executor sends"})
	}
	if len(c.ignored) > 0 {
		keys := c.ignored
		more := ""
		if len(keys) > 8 {
			keys, more = keys[:8], fmt.Sprintf(" and %d more", len(c.ignored)-8)
		}
		n = append(n, Notice{slog.LevelInfo, "Spring Boot keys ignored (they configure a Java application, not this executor): " + strings.Join(keys, ", ") + more})
	}
	return n
}

// flatten lists the errors joined in err, nested joins included.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// epochLocProblems refuses a DSN setting loc to anything but UTC with an
// epoch schema. The close reads the database clock and the shop's times as
// UTC date-times, which the driver takes for times of loc: under
// loc=America/New_York every instant would be five hours late, and orders
// would close five hours before their deadline (under loc=Asia/Shanghai,
// eight hours after it). Unset, loc is UTC (NormalizedDSN).
func (c *Config) epochLocProblems(bad badFunc, unit schema.TimeUnit) {
	check := func(key, dsn string) {
		if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.Loc != nil && cfg.Loc != time.UTC {
			bad.f("%s: loc=%s cannot go with order.schema.timeUnit: %s, whose times are instants read as UTC; remove loc from the DSN (the executor reads date-times as UTC by default)",
				key, cfg.Loc, unit)
		}
	}
	check("mysql.dsn", c.MySQL.DSN)
	for i, src := range c.Order.Sources {
		check(fmt.Sprintf("order.sources item %d (%s): dsn", i+1, orUnnamed(src.Name)), src.DSN)
	}
}
