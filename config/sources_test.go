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

// Without order.sources there is one source, mysql.dsn with its pool and
// the schema's order table: what every configuration meant before.
func TestSourcesDefaultIsMySQLDSN(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith(nil, envOf(map[string]string{"MYSQL_DSN": "u:p@tcp(db:3306)/shop", "MYSQL_MAX_OPEN_CONNS": "7"}))
	require.NoError(t, err)
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	require.Equal(t, []config.Source{{Name: "default", MySQL: cfg.MySQL, Tables: []string{"order_info"}}}, srcs)
}

func TestSourcesFromFile(t *testing.T) {
	t.Parallel()
	yml := `
mysql:
  maxOpenConns: 9
order:
  schema: {table: t_order, items: {table: t_order_item}}
  sources:
    - name: db0
      dsn: app:SECRET@tcp(db0:3306)/shop_0
      tables: t_order_{0..2}
    - name: db1
      dsn: app:SECRET@tcp(db1:3306)/shop_1
      maxOpenConns: 4
      connMaxLifetime: 2m
      tables: ["t_order_{08..10}", t_order]
`
	cfg, err := config.LoadWith([]byte(yml), envOf(nil))
	require.NoError(t, err)
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	require.Equal(t, "db0", srcs[0].Name)
	require.Equal(t, "app:SECRET@tcp(db0:3306)/shop_0", srcs[0].MySQL.DSN)
	require.Equal(t, 9, srcs[0].MySQL.MaxOpenConns, "0 takes mysql.maxOpenConns")
	require.Equal(t, []string{"t_order_0", "t_order_1", "t_order_2"}, srcs[0].Tables)
	require.Equal(t, 4, srcs[1].MySQL.MaxOpenConns)
	require.Equal(t, 2*time.Minute, srcs[1].MySQL.ConnMaxLifetime)
	require.Equal(t, cfg.MySQL.ConnMaxIdleTime, srcs[1].MySQL.ConnMaxIdleTime)
	require.Equal(t, []string{"t_order_08", "t_order_09", "t_order_10", "t_order"}, srcs[1].Tables)

	// The process log never shows a source's password.
	logged := fmt.Sprint(slog.AnyValue(cfg).Resolve())
	require.NotContains(t, logged, "SECRET")
	require.Contains(t, logged, "db1:3306")
}

// ORDER_SOURCES holds the same list as one line of YAML, and wins over
// the file.
func TestSourcesFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith([]byte("order:\n  sources:\n    - {name: file, dsn: 'u@tcp(h:3306)/d', tables: order_info}\n"),
		envOf(map[string]string{"ORDER_SOURCES": `[{name: a, dsn: "u@tcp(a:3306)/s", tables: "order_info_{0..1}"}, {name: b, dsn: "u@tcp(b:3306)/s", tables: order_info}]`}))
	require.NoError(t, err)
	srcs, err := cfg.Sources()
	require.NoError(t, err)
	require.Len(t, srcs, 2)
	require.Equal(t, []string{"order_info_0", "order_info_1"}, srcs[0].Tables)
	require.Equal(t, "b", srcs[1].Name)
}

func TestSourcesRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"not a list", "order:\n  sources: {name: a}\n", nil,
			[]string{"line 2: order.sources: a list of sources is expected, each a mapping with name, dsn and tables"}},
		{"unknown key and bad values", "order:\n  sources:\n    - name: a\n      host: x\n      maxOpenConns: many\n      connMaxIdleTime: soon\n", nil,
			[]string{"line 3: order.sources: item 1 (line 3): unknown key host (known: name, dsn, maxOpenConns, connMaxLifetime, connMaxIdleTime, tables)",
				"line 3: order.sources: item 1 (line 3): maxOpenConns: \"many\" is not a whole number",
				"line 3: order.sources: item 1 (line 3): connMaxIdleTime: \"soon\" is not a duration (e.g. 30s, 2m)"}},
		{"every item checked", `
order:
  schema: {table: t_order, items: {table: t_order_item}}
  sources:
    - {name: "a b", tables: "t_order_{3..1}"}
    - {name: db1, dsn: "nonsense", maxOpenConns: -1, connMaxLifetime: 10ms, tables: [orders_0]}
    - {name: db1, dsn: "u@tcp(h:3306)/d", tables: ["t_order_{0..1}", t_order_1]}
    - {name: db3, dsn: "u@tcp(h:3306)/d"}
`, nil, []string{
			`order.sources item 1 (a b): name: "a b" is not 1-64 letters, digits, '_', '.' or '-'`,
			"order.sources item 1 (a b): dsn: required",
			`order.sources item 1 (a b): tables: table pattern "t_order_{3..1}": the range must go up (FROM <= TO)`,
			"order.sources item 2 (db1): dsn: cannot parse the DSN (user:pass@tcp(host:port)/db?params)",
			"order.sources item 2 (db1): maxOpenConns: -1 is negative (0: mysql.maxOpenConns)",
			"order.sources item 2 (db1): connMaxLifetime: 10ms is outside 1s..24h",
			"order.sources item 2 (db1): tables: table orders_0 does not start with the order table's name t_order (order.schema.table): the item table follows the suffix after it",
			"order.sources item 3 (db1): tables: table t_order_1 is listed twice",
			"order.sources item 3 (db1): name: db1 is used by an earlier item",
			"order.sources item 4 (db3): tables: at least one order table (a name, or a pattern such as t_order_{0..15})",
		}},
		{"environment", "", map[string]string{"ORDER_SOURCES": "[{name: a, dsn: x"},
			[]string{"order.sources (from ORDER_SOURCES): not a YAML list of sources: line 1: did not find expected ',' or '}'"}},
		{"pattern", "order:\n  sources:\n    - {name: a, dsn: 'u@tcp(h:3306)/d', tables: 'order_info_{0..5000}, order_info_{a}'}\n", nil,
			[]string{`order.sources item 1 (a): tables: table pattern "order_info_{0..5000}": 5001 tables, more than 4096`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.LoadWith([]byte(tc.file), envOf(tc.env))
			require.Error(t, err)
			want := fmt.Sprintf("config: %d problem(s):\n%s", len(tc.want), strings.Join(tc.want, "\n"))
			require.Equal(t, want, err.Error())
		})
	}
}
