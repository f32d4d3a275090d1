package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders/schema"
)

func TestSchemaDefaultIsOurs(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith(nil, envOf(nil))
	require.NoError(t, err)
	s, err := cfg.Order.Schema.Schema()
	require.NoError(t, err)
	require.Equal(t, schema.Default(), s)
	require.False(t, s.Declared)
}

func TestSchemaDeclared(t *testing.T) {
	t.Parallel()
	yml := `
order:
  schema:
    table: t_order
    orderNo: order_sn
    user: member_id
    status: order_status
    unpaid: 0
    closed: "'CANCELLED'"
    timeoutColumn: ""
    timeoutMinutes: 15
    closeReason: ""
    updateTime: updated_at
    givebacks: ["member.points += used_points by member.id = member_id"]
    items: {table: t_order_item, index: idx_order_id, orderKey: id, orderColumn: order_id, quantity: num}
    stock: {table: sku_stock, columns: ["locked_stock -= quantity"]}
    coupon:
      table: coupon_history
      used: "'USED'"
      unused: "'UNUSED'"
      match: ["member_id = member_id", "coupon_id = coupon_id"]
      index: idx_member_coupon
`
	cfg, err := config.LoadWith([]byte(yml), envOf(nil))
	require.NoError(t, err)
	s, err := cfg.Order.Schema.Schema()
	require.NoError(t, err)
	require.True(t, s.Declared)
	require.Equal(t, "'CANCELLED'", s.Orders.Closed.SQL())
	require.Equal(t, "0", s.Orders.Unpaid.SQL())
	require.Equal(t, 15, s.Orders.TimeoutMinutes)
	require.True(t, s.Items.ByID)
	require.Equal(t, []schema.StockColumn{{Name: "locked_stock", Subtract: true}}, s.Stock.Columns)
	require.Equal(t, []schema.Pair{{Column: "member_id", OrderColumn: "member_id"}, {Column: "coupon_id", OrderColumn: "coupon_id"}}, s.Coupon.Match)
	require.Equal(t, "idx_member_coupon", s.Coupon.Index)
	require.Equal(t, []schema.Giveback{{Table: "member", Column: "points", Amount: "used_points", Key: "id", OrderKey: "member_id"}}, s.Extra)
}

func TestSchemaRefusesWhatCannotBeSQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ORDER_SCHEMA_TABLE": "t_order; DROP TABLE x"}, `order.schema.table: "t_order; DROP TABLE x" is not a plain table or column name`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_STATUS": "a`b"}, `order.schema.status: "a` + "`" + `b" is not a plain`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_CLOSED": "x' OR '1"}, `order.schema.closed: status value "x' OR '1"`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_CLOSED": "0"}, `order.schema.unpaid, closed: the same value "0"`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_TIMEOUT_COLUMN": ""}, `order.schema.timeoutColumn, timeoutMinutes: name the column`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_STOCK_COLUMNS": "locked = 0"}, `order.schema.stock.columns: stock column "locked = 0": write`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_COUPON_MATCH": "user_id = user_id", "ORDER_SCHEMA_COUPON_INDEX": "idx user"}, `order.schema.coupon.index: "idx user" is not a plain`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_COUPON_OPTIONAL": "true"}, `coupon.optional: only with coupon.match`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_COUPON_ANY_COPY": "true"}, `coupon.anyCopy: only with coupon.match (a coupon by id is one row, named by the order)`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_COUPON_MATCH": "user_id = user_id", "ORDER_SCHEMA_COUPON_ANY_COPY": "true", "ORDER_SCHEMA_COUPON_ID": ""}, `order.schema.coupon.id: required`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_ITEMS_ORDER_KEY": "sn"}, `order.schema.items.orderKey: "sn" is neither orderNo nor id`},
		{map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_GIVEBACKS": "member.points += used_points by users.id = user_id"}, `order.schema.givebacks: giveback "member.points`},
	} {
		_, err := config.LoadWith(nil, envOf(tc.env))
		require.ErrorContains(t, err, tc.want, tc.env)
	}
}

// A declared schema giving only timeoutMinutes means one timeout for every
// order: the per-order column's default (timeout_minutes, the executor's
// own) gives way, from the file or the environment. Given both, the
// configuration still asks for one of them.
func TestSchemaTimeoutMinutesAloneNeedsNoColumn(t *testing.T) {
	t.Parallel()
	yml := "order:\n  schema:\n    table: t_order\n    timeoutMinutes: 20\n"
	for _, tc := range []struct {
		name string
		yml  string
		env  map[string]string
	}{
		{"file", yml, nil},
		{"environment", "", map[string]string{"ORDER_SCHEMA_TABLE": "t_order", "ORDER_SCHEMA_TIMEOUT_MINUTES": "20"}},
	} {
		cfg, err := config.LoadWith([]byte(tc.yml), envOf(tc.env))
		require.NoError(t, err, tc.name)
		s, err := cfg.Order.Schema.Schema()
		require.NoError(t, err, tc.name)
		require.Empty(t, s.Orders.TimeoutColumn, tc.name)
		require.Equal(t, 20, s.Orders.TimeoutMinutes, tc.name)
	}
	_, err := config.LoadWith([]byte(yml+"    timeoutColumn: timeout_minutes\n"), envOf(nil))
	require.ErrorContains(t, err, "order.schema.timeoutColumn, timeoutMinutes: give one of them, not both")
	_, err = config.LoadWith([]byte(yml), envOf(map[string]string{"ORDER_SCHEMA_TIMEOUT_COLUMN": "ttl"}))
	require.ErrorContains(t, err, "give one of them, not both")
}

// TestSchemaDueTimeNamesTheDeadline: a shop storing each order's deadline
// names it in dueTime alone; the defaults of createTime and timeoutColumn
// give way to it, and giving a creation time or a timeout beside it, in the
// file or the environment, is refused.
func TestSchemaDueTimeNamesTheDeadline(t *testing.T) {
	t.Parallel()
	yml := "order:\n  schema:\n    table: t_order\n    scanIndex: idx_status_expire\n    dueTime: expire_at\n"
	for _, tc := range []struct {
		name string
		yml  string
		env  map[string]string
	}{
		{"file", yml, nil},
		{"environment", "", map[string]string{"ORDER_SCHEMA_TABLE": "t_order", "ORDER_SCHEMA_SCAN_INDEX": "idx_status_expire",
			"ORDER_SCHEMA_DUE_TIME": "expire_at"}},
	} {
		cfg, err := config.LoadWith([]byte(tc.yml), envOf(tc.env))
		require.NoError(t, err, tc.name)
		s, err := cfg.Order.Schema.Schema()
		require.NoError(t, err, tc.name)
		require.Equal(t, "expire_at", s.Orders.DueTime, tc.name)
		require.Empty(t, s.Orders.CreateTime, tc.name)
		require.Empty(t, s.Orders.TimeoutColumn, tc.name)
		require.Zero(t, s.Orders.TimeoutMinutes, tc.name)
		require.Equal(t, "expire_at", s.Orders.ScanTime(), tc.name)
	}
	const both = "order.schema.dueTime: the order's deadline is its dueTime; give createTime, timeoutColumn and timeoutMinutes only without it"
	for _, extra := range []string{"    createTime: created_at\n", "    timeoutMinutes: 15\n", "    timeoutColumn: timeout_minutes\n"} {
		_, err := config.LoadWith([]byte(yml+extra), envOf(nil))
		require.ErrorContains(t, err, both, extra)
	}
	_, err := config.LoadWith([]byte(yml), envOf(map[string]string{"ORDER_SCHEMA_CREATE_TIME": "created_at"}))
	require.ErrorContains(t, err, both)
	_, err = config.LoadWith([]byte(yml+"    createTime: \"\"\n    timeoutColumn: \"\"\n    timeoutMinutes: 0\n"), envOf(nil))
	require.NoError(t, err, "set to none, they are not given")
}

// TestSchemaTimeUnit: order.schema.timeUnit says how every time column of
// a declared schema holds its times (datetime by default), from the file
// or the environment; a unit it does not know is refused with the one
// meant.
func TestSchemaTimeUnit(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith([]byte("order:\n  schema:\n    table: t_order\n    timeoutMinutes: 15\n"), envOf(nil))
	require.NoError(t, err)
	s, err := cfg.Order.Schema.Schema()
	require.NoError(t, err)
	require.Equal(t, schema.DateTime, s.Orders.TimeUnit)
	for unit, want := range map[string]schema.TimeUnit{"datetime": schema.DateTime, "epochSeconds": schema.EpochSeconds, "epochMillis": schema.EpochMillis} {
		cfg, err := config.LoadWith([]byte("order:\n  schema:\n    table: t_order\n    timeoutMinutes: 15\n    timeUnit: "+unit+"\n"), envOf(nil))
		require.NoError(t, err, unit)
		s, err := cfg.Order.Schema.Schema()
		require.NoError(t, err, unit)
		require.Equal(t, want, s.Orders.TimeUnit, unit)
		cfg, err = config.LoadWith(nil, envOf(map[string]string{"ORDER_SCHEMA_TABLE": "t_order", "ORDER_SCHEMA_TIMEOUT_MINUTES": "15",
			"ORDER_SCHEMA_TIME_UNIT": unit}))
		require.NoError(t, err, unit)
		s, err = cfg.Order.Schema.Schema()
		require.NoError(t, err, unit)
		require.Equal(t, want, s.Orders.TimeUnit, unit)
	}
	_, err = config.LoadWith(nil, envOf(map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_TIME_UNIT": "epochMilis"}))
	require.ErrorContains(t, err, `order.schema.timeUnit: "epochMilis" is none of datetime, epochSeconds, epochMillis; did you mean epochMillis?`)
	_, err = config.LoadWith(nil, envOf(map[string]string{"ORDER_SCHEMA_TABLE": "t", "ORDER_SCHEMA_TIME_UNIT": "unix"}))
	require.ErrorContains(t, err, `order.schema.timeUnit: "unix" is none of datetime, epochSeconds, epochMillis`)
	require.NotContains(t, err.Error(), "did you mean")
}

// An epoch schema's times are instants the driver reads as UTC date-times:
// a DSN whose loc is another zone would shift every deadline by its
// offset, so it is refused, for mysql.dsn and for each order source.
func TestSchemaEpochRefusesADSNLoc(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ORDER_SCHEMA_TABLE": "t_order", "ORDER_SCHEMA_TIMEOUT_MINUTES": "15", "ORDER_SCHEMA_TIME_UNIT": "epochMillis",
		"MYSQL_DSN": "app:pw@tcp(db:3306)/shop?parseTime=true&loc=America%2FNew_York"}
	_, err := config.LoadWith(nil, envOf(env))
	require.ErrorContains(t, err, "mysql.dsn: loc=America/New_York cannot go with order.schema.timeUnit: epochMillis")
	env["MYSQL_DSN"] = "app:pw@tcp(db:3306)/shop?loc=UTC"
	_, err = config.LoadWith(nil, envOf(env))
	require.NoError(t, err, "loc=UTC is what the executor sets anyway")
	env["ORDER_SCHEMA_TIME_UNIT"], env["MYSQL_DSN"] = "datetime", "app:pw@tcp(db:3306)/shop?loc=Local"
	_, err = config.LoadWith(nil, envOf(env))
	require.NoError(t, err, "date-times round-trip in any loc")

	yml := "mysql:\n  dsn: app:pw@tcp(db:3306)/shop\norder:\n  schema:\n    table: t_order\n    timeoutMinutes: 15\n    timeUnit: epochSeconds\n" +
		"  sources:\n    - name: db1\n      dsn: app:pw@tcp(db1:3306)/shop?loc=Asia%2FShanghai\n      tables: [t_order]\n"
	_, err = config.LoadWith([]byte(yml), envOf(nil))
	require.ErrorContains(t, err, "order.sources item 1 (db1): dsn: loc=Asia/Shanghai cannot go with order.schema.timeUnit: epochSeconds")
}

// TestSchemaSoftDelete: order.schema.softDelete names the column marking
// an order deleted and its value on a live order, from the file or the
// environment; left out, there is no soft delete. An empty liveValue, or
// NULL unquoted, means NULL is live; a liveValue without its column,
// softDelete without a declared table and a misspelled key are refused.
func TestSchemaSoftDelete(t *testing.T) {
	t.Parallel()
	const table = "order:\n  schema:\n    table: t_order\n    timeoutMinutes: 15\n"
	load := func(yml string, env map[string]string) (schema.SoftDelete, error) {
		cfg, err := config.LoadWith([]byte(yml), envOf(env))
		if err != nil {
			return schema.SoftDelete{}, err
		}
		s, err := cfg.Order.Schema.Schema()
		require.NoError(t, err, "Load checked it")
		return s.Orders.SoftDelete, nil
	}
	d, err := load(table, nil)
	require.NoError(t, err)
	require.False(t, d.Declared(), "no soft delete unless declared")

	for _, tc := range []struct {
		name, yml      string
		env            map[string]string
		column, sqlLit string // sqlLit "": NULL is live
	}{
		{"integer flag", table + "    softDelete: {column: delete_status, liveValue: 0}\n", nil, "delete_status", "0"},
		{"text flag", table + "    softDelete:\n      column: del_flag\n      liveValue: \"'0'\"\n", nil, "del_flag", "'0'"},
		{"word", table + "    softDelete: {column: state, liveValue: active}\n", nil, "state", "'active'"},
		{"NULL is live", table + "    softDelete: {column: deleted_at}\n", nil, "deleted_at", ""},
		{"NULL written out", table + "    softDelete: {column: deleted_at, liveValue: NULL}\n", nil, "deleted_at", ""},
		{"NULL from the environment", table, map[string]string{"ORDER_SCHEMA_SOFT_DELETE_COLUMN": "deleted_at",
			"ORDER_SCHEMA_SOFT_DELETE_LIVE_VALUE": "null"}, "deleted_at", ""},
		{"the text NULL", table + "    softDelete: {column: state, liveValue: \"'NULL'\"}\n", nil, "state", "'NULL'"},
		{"environment", table, map[string]string{"ORDER_SCHEMA_SOFT_DELETE_COLUMN": "is_deleted", "ORDER_SCHEMA_SOFT_DELETE_LIVE_VALUE": "0"},
			"is_deleted", "0"},
	} {
		d, err := load(tc.yml, tc.env)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.column, d.Column, tc.name)
		if tc.sqlLit == "" {
			require.True(t, d.Live.IsZero(), tc.name)
		} else {
			require.Equal(t, tc.sqlLit, d.Live.SQL(), tc.name)
		}
	}

	for _, tc := range []struct{ yml, want string }{
		{table + "    softDelete: {liveValue: 0}\n",
			`order.schema.softDelete.liveValue: "0" given without softDelete.column; name the column it is the value of`},
		{table + "    softDelete: {column: \"is deleted\", liveValue: 0}\n",
			`order.schema.softDelete.column: "is deleted" is not a plain table or column name`},
		{table + "    softDelete: {column: del_flag, liveValue: \"0' OR '1\"}\n", `order.schema.softDelete.liveValue: status value "0' OR '1"`},
		{"order:\n  schema:\n    softDelete: {column: is_deleted, liveValue: 0}\n",
			"order.schema.softDelete: the executor's own order_info has no soft delete; name the shop's order table in order.schema.table, or leave softDelete out"},
		{table + "    softDelete: {column: is_deleted, liveVaule: 0}\n",
			"unknown key order.schema.softDelete.liveVaule; did you mean order.schema.softDelete.liveValue?"},
		{table + "    softDelet: {column: is_deleted}\n", "unknown key order.schema.softDelet; did you mean order.schema.softDelete?"},
	} {
		_, err := load(tc.yml, nil)
		require.ErrorContains(t, err, tc.want, tc.yml)
	}
}
