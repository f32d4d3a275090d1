package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/sql/migrations"
)

// The order tables order.sources lists are checked as order_info and
// order_item are: a unit table missing, or lacking a column or an index
// the close and the lifecycle jobs use, is reported naming it, with the
// statement that fixes it (migrate never changes these tables); a unit
// table that has everything passes.
func TestCheckVerifiesTheSourcesOrderTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := migrations.Apply(b.ctx, b.db.DB.DB)
	require.NoError(t, err)
	b.exec(t, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_item_1 LIKE order_item",
		"CREATE TABLE order_info_2 LIKE order_info", "CREATE TABLE order_item_2 LIKE order_item",
		"ALTER TABLE order_info_2 DROP INDEX idx_status_ship_time, DROP COLUMN complete_time")

	m, err := migrations.New(b.db.DB.DB, migrations.Config{OrderTables: []string{"order_info", "order_info_1"}})
	require.NoError(t, err)
	require.NoError(t, m.Check(b.ctx))

	m, err = migrations.New(b.db.DB.DB, migrations.Config{OrderTables: []string{"order_info_1", "order_info_2", "order_info_3"}})
	require.NoError(t, err)
	err = m.Check(b.ctx)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	msg := err.Error()
	require.Contains(t, msg, "the order tables listed in order.sources are not what the executor needs (4 to fix; "+
		"executor migrate never changes them, the fixes are for a DBA):")
	for _, want := range []string{
		"column order_info_2.complete_time is missing; fix: ALTER TABLE order_info_2 ADD COLUMN complete_time DATETIME(3) NULL",
		"index order_info_2.idx_status_ship_time is missing; fix: ALTER TABLE order_info_2 ADD KEY idx_status_ship_time (status, ship_time)",
		"table order_info_3 is missing; fix: CREATE TABLE order_info_3 LIKE order_info",
		"table order_item_3 is missing; fix: CREATE TABLE order_item_3 LIKE order_item",
	} {
		require.Contains(t, msg, "\n  "+want)
	}
	st, err := m.Status(b.ctx)
	require.NoError(t, err)
	require.Len(t, st.Problems, 4)
	require.Equal(t, migrations.SourcesSetting, st.Problems[0].Source)
}

// With a declared schema the shop's tables checked are the first order
// table's, and each other listed table is checked as the declaration asks
// of its unit: a missing scan index and a missing table are named with the
// statements that fix them.
func TestCheckVerifiesDeclaredSourcesOrderTables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateDeclared(t)
	b.exec(t, "CREATE TABLE order_info_1 LIKE order_info", "CREATE TABLE order_goods_1 LIKE order_goods",
		"CREATE TABLE order_info_2 LIKE order_info", "CREATE TABLE order_goods_2 LIKE order_goods",
		"ALTER TABLE order_info_2 DROP INDEX idx_status_created")
	cfg := migrations.Config{Shop: foreignSchema(t), OrderTables: []string{"order_info_1", "order_info_2", "order_info_3"}}
	err := b.migrator(t, cfg).Check(b.ctx)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	got := map[string]string{}
	for _, p := range se.Problems {
		require.Equal(t, migrations.SourcesSetting, p.Source, p.String())
		got[p.Table+" "+p.Object] = p.Fix
	}
	require.Equal(t, map[string]string{
		"order_info_2 index idx_status_created": "CREATE INDEX `idx_status_created` ON `order_info_2` (`order_status`, `created_at`, `id`) ALGORITHM=INPLACE LOCK=NONE",
		"order_info_3 table order_info_3":       "CREATE TABLE order_info_3 LIKE order_info_1",
		"order_goods_3 table order_goods_3":     "CREATE TABLE order_goods_3 LIKE order_goods_1",
	}, got)
	b.exec(t, "CREATE INDEX `idx_status_created` ON `order_info_2` (`order_status`, `created_at`, `id`)",
		"CREATE TABLE order_info_3 LIKE order_info_1", "CREATE TABLE order_goods_3 LIKE order_goods_1")
	require.NoError(t, b.migrator(t, cfg).Check(b.ctx))
}
