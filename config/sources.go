package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderjob/executor/orders/schema"
)

// OrderSource is one item of order.sources: an order database with its own
// connection pool, and the order tables in it. Zero pool settings take
// mysql.*'s.
type OrderSource struct {
	Name            string
	DSN             string
	MaxOpenConns    int
	ConnMaxLifetime time.Duration
	ConnMaxIdleTime time.Duration
	// Tables are the order tables as written: names or patterns
	// (t_order_{0..15}).
	Tables []string
}

// OrderSources is order.sources: a YAML list of mappings in the file, the
// same list as one line of YAML (flow style) in ORDER_SOURCES.
type OrderSources []OrderSource

// sourceKeys are the keys of an order.sources item, by normKey.
var sourceKeys = map[string]string{"name": "name", "dsn": "dsn", "maxopenconns": "maxOpenConns",
	"connmaxlifetime": "connMaxLifetime", "connmaxidletime": "connMaxIdleTime", "tables": "tables"}

// setYAML reads the list from its YAML node; problems name the item and
// its line.
func (s *OrderSources) setYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || strings.TrimSpace(n.Value) == "") {
		*s = nil
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return errors.New("a list of sources is expected, each a mapping with name, dsn and tables")
	}
	var out OrderSources
	var errs []error
	for i, item := range n.Content {
		src, problems := sourceOf(item)
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("item %d (line %d): %w", i+1, item.Line, p))
		}
		out = append(out, src)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*s = out
	return nil
}

// setText reads the list from the environment: the same list written as
// YAML, e.g. [{name: a, dsn: "...", tables: "t_order_{0..7}"}].
func (s *OrderSources) setText(text string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return fmt.Errorf("not a YAML list of sources: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		*s = nil
		return nil
	}
	return s.setYAML(doc.Content[0])
}

// sourceOf reads one item, with its problems.
func sourceOf(n *yaml.Node) (OrderSource, []error) {
	var src OrderSource
	if n.Kind != yaml.MappingNode {
		return src, []error{errors.New("a mapping with name, dsn and tables is expected")}
	}
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, ok := sourceKeys[normKey(k.Value)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("unknown key %s (known: name, dsn, maxOpenConns, connMaxLifetime, connMaxIdleTime, tables)", k.Value))
			continue
		case seen[key]:
			errs = append(errs, fmt.Errorf("%s is given twice", key))
			continue
		}
		seen[key] = true
		if err := src.set(key, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	return src, errs
}

// set sets the item's key from its node.
func (src *OrderSource) set(key string, v *yaml.Node) error {
	if key == "tables" && v.Kind == yaml.SequenceNode {
		for _, c := range v.Content {
			if c.Kind != yaml.ScalarNode {
				return errors.New("list items must be table names or patterns")
			}
			src.Tables = append(src.Tables, strings.TrimSpace(c.Value))
		}
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return errors.New("expected a value")
	}
	var err error
	switch key {
	case "name":
		src.Name = strings.TrimSpace(v.Value)
	case "dsn":
		src.DSN = strings.TrimSpace(v.Value)
	case "maxOpenConns":
		if src.MaxOpenConns, err = strconv.Atoi(strings.TrimSpace(v.Value)); err != nil {
			return fmt.Errorf("%q is not a whole number", v.Value)
		}
	case "connMaxLifetime":
		src.ConnMaxLifetime, err = parseDuration(v.Value)
	case "connMaxIdleTime":
		src.ConnMaxIdleTime, err = parseDuration(v.Value)
	case "tables":
		for _, t := range strings.Split(v.Value, ",") {
			if t = strings.TrimSpace(t); t != "" {
				src.Tables = append(src.Tables, t)
			}
		}
	}
	return err
}

// String is the list for the process log: every DSN's password masked.
func (s OrderSources) String() string {
	parts := make([]string, 0, len(s))
	for _, src := range s {
		parts = append(parts, fmt.Sprintf("{name: %s, dsn: %s, maxOpenConns: %d, connMaxLifetime: %s, connMaxIdleTime: %s, tables: [%s]}",
			src.Name, redactDSN(src.DSN), src.MaxOpenConns, src.ConnMaxLifetime, src.ConnMaxIdleTime, strings.Join(src.Tables, ", ")))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Source is one order database as the executor opens it: mysql.* with the
// source's DSN and pool, and its order tables, expanded.
type Source struct {
	Name   string
	MySQL  MySQL
	Tables []string
}

// OnHomeDatabase reports whether src keeps its rows in mysql.dsn's
// database: the same DSN once normalised, however it is spelled.
func (c *Config) OnHomeDatabase(src Source) bool {
	home, _ := c.MySQL.NormalizedDSN() // checked by the loader
	dsn, _ := src.MySQL.NormalizedDSN()
	return dsn == home
}

// DefaultSourceName names the one source of a configuration without
// order.sources (mysql.dsn).
const DefaultSourceName = "default"

// sourceName is what a source may be called: it labels metrics, run
// records and log lines.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// Sources returns the order databases: order.sources, or without it one
// source named "default" on mysql.dsn holding order.schema's order table,
// which is what every configuration before order.sources meant.
func (c *Config) Sources() ([]Source, error) {
	sch, err := c.Order.Schema.Schema()
	if err != nil {
		return nil, fmt.Errorf("order.schema: %w", err)
	}
	if len(c.Order.Sources) == 0 {
		return []Source{{Name: DefaultSourceName, MySQL: c.MySQL, Tables: []string{sch.Orders.Table}}}, nil
	}
	var out []Source
	var errs []error
	names := map[string]bool{}
	for i, s := range c.Order.Sources {
		src, problems := c.source(s, sch)
		if names[s.Name] {
			problems = append(problems, fmt.Errorf("name: %s is used by an earlier item", s.Name))
		}
		names[s.Name] = true
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("order.sources item %d (%s): %w", i+1, orUnnamed(s.Name), p))
		}
		out = append(out, src)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func orUnnamed(name string) string {
	if name == "" {
		return "unnamed"
	}
	return name
}

// source resolves one item against mysql.* and the schema, with its
// problems.
func (c *Config) source(s OrderSource, sch schema.Schema) (Source, []error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !sourceName.MatchString(s.Name) {
		bad("name: %q is not 1-64 letters, digits, '_', '.' or '-'", s.Name)
	}
	m := c.MySQL
	m.DSN = s.DSN
	if s.DSN == "" {
		bad("dsn: required")
	} else if err := m.checkDSN(); err != nil {
		bad("dsn: %v", err)
	}
	if s.MaxOpenConns < 0 {
		bad("maxOpenConns: %d is negative (0: mysql.maxOpenConns)", s.MaxOpenConns)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"connMaxLifetime", s.ConnMaxLifetime}, {"connMaxIdleTime", s.ConnMaxIdleTime}} {
		if d.v != 0 && (d.v < time.Second || d.v > 24*time.Hour) {
			bad("%s: %s is outside 1s..24h", d.key, d.v)
		}
	}
	m.MaxOpenConns = cmp.Or(s.MaxOpenConns, m.MaxOpenConns)
	m.ConnMaxLifetime = cmp.Or(s.ConnMaxLifetime, m.ConnMaxLifetime)
	m.ConnMaxIdleTime = cmp.Or(s.ConnMaxIdleTime, m.ConnMaxIdleTime)
	tables, err := schema.ExpandTables(s.Tables)
	switch {
	case err != nil:
		bad("tables: %v", err)
	case len(tables) == 0:
		bad("tables: at least one order table (a name, or a pattern such as %s_{0..15})", sch.Orders.Table)
	}
	for _, t := range tables {
		if _, err := sch.ForTable(t); err != nil {
			bad("tables: %v", err)
			break
		}
	}
	return Source{Name: s.Name, MySQL: m, Tables: tables}, errs
}
