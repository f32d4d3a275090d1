package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v3"
)

// Key describes one configuration key.
type Key struct {
	Path    string // dotted YAML path, e.g. xxl.job.executor.port
	Env     string // environment variable
	Default string // default as text ("" if none)
	Secret  bool   // never logged
	Doc     string // one-line description
}

// Keys lists every key in declaration order.
func Keys() []Key {
	var keys []Key
	walk(reflect.ValueOf(&Config{}).Elem(), "", func(f field) error {
		keys = append(keys, Key{Path: f.path, Env: f.env, Default: f.def, Secret: f.secret, Doc: f.doc})
		return nil
	})
	return keys
}

// Default returns the configuration with every default applied.
func Default() *Config {
	c, err := load(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		panic("config: defaults do not parse: " + err.Error()) // a bad struct tag; caught by tests
	}
	return c
}

// Load reads the YAML file at path (none if path is empty), then applies the
// environment, then validates. All problems are returned together.
func Load(path string) (*Config, error) {
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: read %s: %w", path, err)
		}
		data = b
	}
	return load(data, os.LookupEnv)
}

// LoadWith is Load with the file's content and the environment given, for tests
// and tools.
func LoadWith(yamlData []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return load(yamlData, lookupEnv)
}

func load(yamlData []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	c := &Config{}
	root := reflect.ValueOf(c).Elem()
	var problems []error

	_ = walk(root, "", func(f field) error {
		if f.def != "" {
			if err := setText(f.v, f.def); err != nil {
				problems = append(problems, fmt.Errorf("default of %s: %w", f.path, err))
			}
		}
		return nil
	})

	if len(yamlData) > 0 {
		var doc yaml.Node
		if err := yaml.Unmarshal(yamlData, &doc); err != nil {
			problems = append(problems, fmt.Errorf("yaml: %w", err))
		} else if len(doc.Content) > 0 {
			problems = append(problems, applyNode(root, "", doc.Content[0])...)
		}
	}

	_ = walk(root, "", func(f field) error {
		if v, ok := lookupEnv(f.env); ok && f.env != "" {
			if err := setText(f.v, v); err != nil {
				problems = append(problems, fmt.Errorf("%s (from %s): %w", f.path, f.env, err))
			}
		}
		return nil
	})

	problems = append(problems, c.validate()...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("config: %d problem(s):\n%w", len(problems), errors.Join(problems...))
	}
	return c, nil
}

type field struct {
	v                   reflect.Value
	path, env, def, doc string
	secret              bool
}

// walk visits every leaf field (one with an env tag) below v.
func walk(v reflect.Value, prefix string, fn func(field) error) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		path := joinPath(prefix, sf.Tag.Get("yaml"))
		fv := v.Field(i)
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
			if err := walk(fv, path, fn); err != nil {
				return err
			}
			continue
		}
		err := fn(field{v: fv, path: path, env: sf.Tag.Get("env"), def: sf.Tag.Get("default"),
			doc: sf.Tag.Get("doc"), secret: sf.Tag.Get("secret") == "true"})
		if err != nil {
			return err
		}
	}
	return nil
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// normKey folds the spellings Spring's relaxed binding accepts
// (logRetentionDays, log-retention-days, log_retention_days) to one.
func normKey(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
}

// applyNode sets the fields of struct v from a YAML mapping node. Dotted keys
// (`xxl.job.executor.port: 9999`, as in application.properties) are accepted.
func applyNode(v reflect.Value, path string, n *yaml.Node) []error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return []error{fmt.Errorf("line %d: %s must be a mapping", n.Line, orRoot(path))}
	}
	var problems []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		parts := strings.Split(k.Value, ".")
		target, tpath, ok := v, path, true
		for j, part := range parts {
			fv, sf, found := fieldByKey(target, part)
			if !found {
				problems = append(problems, fmt.Errorf("line %d: unknown key %s", k.Line, joinPath(tpath, part)))
				ok = false
				break
			}
			tpath = joinPath(tpath, sf.Tag.Get("yaml"))
			if j < len(parts)-1 {
				if fv.Kind() != reflect.Struct {
					problems = append(problems, fmt.Errorf("line %d: %s is not a section", k.Line, tpath))
					ok = false
					break
				}
			}
			target = fv
		}
		if !ok {
			continue
		}
		if target.Kind() == reflect.Struct && target.Type() != reflect.TypeFor[time.Duration]() {
			if val.Tag == "!!null" {
				continue
			}
			problems = append(problems, applyNode(target, tpath, val)...)
			continue
		}
		if err := setNode(target, val); err != nil {
			problems = append(problems, fmt.Errorf("line %d: %s: %w", val.Line, tpath, err))
		}
	}
	return problems
}

func orRoot(p string) string {
	if p == "" {
		return "the document"
	}
	return p
}

func fieldByKey(v reflect.Value, key string) (reflect.Value, reflect.StructField, bool) {
	want := normKey(key)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if normKey(t.Field(i).Tag.Get("yaml")) == want {
			return v.Field(i), t.Field(i), true
		}
	}
	return reflect.Value{}, reflect.StructField{}, false
}

func setNode(v reflect.Value, n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return setText(v, n.Value)
	case yaml.SequenceNode:
		if v.Kind() != reflect.Slice {
			return errors.New("a list is not allowed here")
		}
		items := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return errors.New("list items must be plain values")
			}
			items = append(items, strings.TrimSpace(c.Value))
		}
		v.Set(reflect.ValueOf(items))
		return nil
	default:
		return errors.New("expected a value, found a mapping")
	}
}

// setText parses s into v according to v's type.
func setText(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				items = append(items, p)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// parseDuration accepts Go durations ("30s", "2m") and bare seconds ("30").
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 2m)", s)
	}
	return d, nil
}

func (c *Config) validate() []error {
	var p []error
	bad := func(format string, args ...any) { p = append(p, fmt.Errorf(format, args...)) }

	if len(c.XXL.Job.Admin.Addresses) == 0 {
		bad("xxl.job.admin.addresses: at least one admin address is needed")
	}
	for _, a := range c.XXL.Job.Admin.Addresses {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("xxl.job.admin.addresses: %q is not an http(s) URL", a)
		}
	}
	if d := c.XXL.Job.Admin.Timeout; d <= 0 || d > time.Minute {
		bad("xxl.job.admin.timeout: %s is outside 1ms..1m", d)
	}
	switch c.XXL.Job.Admin.Version {
	case "auto", "2.4", "3.4":
	default:
		bad("xxl.job.admin.version: %q is not auto, 2.4 or 3.4", c.XXL.Job.Admin.Version)
	}
	ex := c.XXL.Job.Executor
	if n := len(ex.AppName); n < 4 || n > 64 {
		bad("xxl.job.executor.appname: %q must be 4-64 characters (the admin's rule)", ex.AppName)
	}
	if ex.Address != "" {
		if u, err := url.Parse(ex.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("xxl.job.executor.address: %q is not an http(s) URL", ex.Address)
		}
	}
	if ex.Port < 1 || ex.Port > 65535 {
		bad("xxl.job.executor.port: %d is not a port (1-65535)", ex.Port)
	}
	if ex.LogPath == "" {
		bad("xxl.job.executor.logpath: must not be empty")
	}
	if ex.LogRetentionDays < 0 {
		bad("xxl.job.executor.logretentiondays: %d is negative", ex.LogRetentionDays)
	}
	if ex.ShutdownTimeout < 0 {
		bad("xxl.job.executor.shutdownTimeout: %s is negative", ex.ShutdownTimeout)
	}
	if _, err := c.MySQL.NormalizedDSN(); err != nil {
		bad("mysql.dsn: %v", err)
	}
	if c.MySQL.MaxOpenConns < 1 {
		bad("mysql.maxOpenConns: %d must be at least 1", c.MySQL.MaxOpenConns)
	}
	if len(c.Redis.Addr) == 0 {
		bad("redis.addr: at least one address is needed")
	}
	switch c.Redis.Mode {
	case "auto", "single", "cluster":
	case "sentinel":
		if c.Redis.MasterName == "" {
			bad("redis.masterName: needed in sentinel mode")
		}
	default:
		bad("redis.mode: %q is not auto, single, sentinel or cluster", c.Redis.Mode)
	}
	if c.API.TokenHeader == "" {
		bad("api.tokenHeader: must not be empty")
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		bad("log.level: %v", err)
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		bad("log.format: %q is not json or text", c.Log.Format)
	}
	t := c.Order.Timeout
	if t.PaymentTimeoutMinutes < 1 {
		bad("order.timeout.payment_timeout_minutes: %d must be at least 1", t.PaymentTimeoutMinutes)
	}
	if t.FulfillmentTimeoutDays < 1 {
		bad("order.timeout.fulfillment_timeout_days: %d must be at least 1", t.FulfillmentTimeoutDays)
	}
	if t.AutoConfirmDays < 1 {
		bad("order.timeout.auto_confirm_days: %d must be at least 1", t.AutoConfirmDays)
	}
	if c.Order.Close.LockTTL < time.Second {
		bad("order.close.lockTTL: %s is below 1s", c.Order.Close.LockTTL)
	}
	if ps := c.Order.Close.PageSize; ps < 1 || ps > 5000 {
		bad("order.close.pageSize: %d is outside 1..5000", ps)
	}
	if c.Order.DeadLetter.MaxAttempts < 1 {
		bad("order.deadLetter.maxAttempts: %d must be at least 1", c.Order.DeadLetter.MaxAttempts)
	}
	if b := c.Order.DeadLetter; b.BaseBackoff <= 0 || b.MaxBackoff < b.BaseBackoff {
		bad("order.deadLetter: baseBackoff (%s) must be positive and at most maxBackoff (%s)", b.BaseBackoff, b.MaxBackoff)
	}
	if u := c.Order.Payment.CloseURL; u != "" && !isHTTPURL(u) {
		bad("order.payment.closeURL: %q is not an http(s) URL", u)
	}
	if c.Order.Payment.Timeout <= 0 || c.Order.Payment.Retries < 0 {
		bad("order.payment: timeout must be positive and retries not negative")
	}
	switch cm := c.Order.Compensation; cm.Mode {
	case "local":
	case "outbox":
		if !isHTTPURL(cm.InventoryURL) || !isHTTPURL(cm.CouponURL) {
			bad("order.compensation: outbox mode needs http(s) inventoryURL and couponURL")
		}
	default:
		bad("order.compensation.mode: %q is not local or outbox", cm.Mode)
	}
	d := c.Delay
	if d.RunningTimeout <= 0 || d.HandlerTimeout <= 0 || d.HandlerTimeout >= d.RunningTimeout {
		bad("delay.handlerTimeout (%s) must be positive and below delay.runningTimeout (%s)", d.HandlerTimeout, d.RunningTimeout)
	}
	if d.ReconcileInterval <= 0 {
		bad("delay.reconcileInterval: %s must be positive", d.ReconcileInterval)
	}
	for _, s := range d.Services {
		name, base, ok := strings.Cut(s, "=")
		if u, err := url.Parse(base); !ok || name == "" || err != nil || u.Host == "" {
			bad("delay.services: %q is not name=http://host/base", s)
		}
	}
	return p
}

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

// NormalizedDSN returns the DSN with what the executor needs: parseTime, loc
// (UTC when unset: DATETIME values then round-trip unchanged, whatever zone
// they mean) and, when TimeZone is set, the session time_zone.
func (m MySQL) NormalizedDSN() (string, error) {
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		return "", errors.New("cannot parse the DSN (user:pass@tcp(host:port)/db?params)")
	}
	cfg.ParseTime = true
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	// One round trip per statement instead of prepare+execute+close.
	cfg.InterpolateParams = true
	if m.TimeZone != "" {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["time_zone"] = "'" + strings.Trim(m.TimeZone, "'") + "'"
	}
	return cfg.FormatDSN(), nil
}

// LogValue renders the configuration for the process log with every secret
// replaced, so the whole struct can be logged at start.
func (c *Config) LogValue() slog.Value {
	var attrs []slog.Attr
	_ = walk(reflect.ValueOf(c).Elem(), "", func(f field) error {
		val := fmt.Sprint(f.v.Interface())
		if f.secret {
			if f.path == "mysql.dsn" {
				val = redactDSN(f.v.String())
			} else if val != "" {
				val = "[redacted]"
			}
		}
		attrs = append(attrs, slog.String(f.path, val))
		return nil
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
