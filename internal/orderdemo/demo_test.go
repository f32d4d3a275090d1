package orderdemo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
)

func TestGenerateDemo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := orderdemo.Spec{Orders: 10_000, SKUs: 300, DueFraction: 0.7, PaidFraction: 0.2, NotDueFraction: 0.1, CouponFraction: 0.3, Reset: true}
	res, err := orderdemo.Generate(b.ctx, b.db.DB, spec)
	require.NoError(t, err)
	require.Equal(t, 10_000, res.Orders)
	require.Equal(t, res.Orders, res.Due+res.Paid+res.NotDue)
	require.InDelta(t, 7000, res.Due, 300)
	require.InDelta(t, 2000, res.Paid, 300)
	require.InDelta(t, 3000, res.Coupons, 300)
	require.Equal(t, int64(1), res.FirstID)
	require.Equal(t, int64(10_000), res.LastID)

	c := b.counts(t)
	require.Equal(t, res.Paid, c.Paid)
	require.Equal(t, res.Due+res.NotDue, c.Unpaid)
	require.Equal(t, res.Due, c.Due, "due by the database clock")
	require.Equal(t, res.Items, b.count(t, `SELECT COUNT(*) FROM order_item`))
	require.Equal(t, 300*1_000_000, b.count(t, `SELECT SUM(available + locked) FROM inventory`)+
		b.count(t, `SELECT COALESCE(SUM(it.quantity), 0) FROM order_item it JOIN order_info o ON o.order_no = it.order_no WHERE o.status = 1`))
	var oldestNotDue time.Time
	require.NoError(t, b.db.GetContext(b.ctx, &oldestNotDue, `SELECT MIN(create_time) FROM order_info
		WHERE status = 0 AND create_time + INTERVAL timeout_minutes MINUTE > NOW()`))
	require.True(t, !oldestNotDue.Before(res.Now.Add(-15*time.Minute)), "not-due orders stay not due for half their timeout")

	// Invariants hold on fresh data: a baseline of uniform totals checks out.
	uniform := &ordertest.Baseline{Stock: map[int64]int64{}}
	for sku := int64(1); sku <= 300; sku++ {
		uniform.Stock[sku] = 1_000_000
	}
	require.NoError(t, ordertest.Check(b.ctx, b.db, uniform))

	// Appending keeps ids and numbers unique and adds stock.
	more, err := orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 500, SKUs: 300, Seed: 2})
	require.NoError(t, err)
	require.Equal(t, int64(10_001), more.FirstID)
	for sku := range uniform.Stock {
		uniform.Stock[sku] = 2_000_000
	}
	require.NoError(t, ordertest.Check(b.ctx, b.db, uniform))

	// Reset starts over.
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, SKUs: 5, Reset: true})
	require.NoError(t, err)
	require.Equal(t, 10, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.Equal(t, 5, b.count(t, `SELECT COUNT(*) FROM inventory`))

	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, DueFraction: 0.8, PaidFraction: 0.5})
	require.Error(t, err, "fractions above 1")
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, OrderNoPrefix: "x'; DROP"})
	require.Error(t, err, "unsafe prefix")
}

// A reset empties nine tables of whatever database the DSN names: it runs
// only when every row in them is one the generator made.
func TestDemoResetRefusesRowsItDidNotMake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table, row string
		insert           []string
	}{
		{"real orders", "order_info", "REAL-1", []string{
			`INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes) VALUES ('REAL-1', 7, 0, NOW(), 30), ('REAL-2', 8, 1, NOW(), 30)`}},
		{"a real coupon", "user_coupon", "", []string{`INSERT INTO user_coupon (user_id, status) VALUES (7, 0)`}},
		{"a real stock row", "inventory", "900", []string{`INSERT INTO inventory (sku_id, available) VALUES (900, 5)`}},
		{"an item of no demo order", "order_item", "REAL-9", []string{`INSERT INTO order_item (order_no, sku_id, quantity) VALUES ('REAL-9', 1, 1)`}},
		{"a close log of no demo order", "order_close_log", "REAL-3", []string{`INSERT INTO order_close_log (order_no, closed_at, reason) VALUES ('REAL-3', NOW(), 'x')`}},
		// An order whose number is not its batch's prefix + id is not a demo order, whatever its id.
		{"a renumbered order", "order_info", "SHOP-2", []string{`UPDATE order_info SET order_no = 'SHOP-2' WHERE id = 2`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 50, SKUs: 10, CouponFraction: 0.5})
			require.NoError(t, err)
			for _, s := range tc.insert {
				_, err := b.db.ExecContext(b.ctx, s)
				require.NoError(t, err)
			}
			before := b.count(t, `SELECT COUNT(*) FROM order_info`) + b.count(t, `SELECT COUNT(*) FROM user_coupon`)*1000 +
				b.count(t, `SELECT COUNT(*) FROM inventory`)*1_000_000

			_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, SKUs: 10, Reset: true})
			var re *orderdemo.ResetError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.table, re.Table)
			if tc.row != "" {
				require.Equal(t, tc.row, re.Row)
			}
			require.Equal(t, b.db.Name, re.Database)
			require.Contains(t, err.Error(), "-reset-database "+b.db.Name)
			after := b.count(t, `SELECT COUNT(*) FROM order_info`) + b.count(t, `SELECT COUNT(*) FROM user_coupon`)*1000 +
				b.count(t, `SELECT COUNT(*) FROM inventory`)*1_000_000
			require.Equal(t, before, after, "nothing changed")

			// The second key: the database's own name.
			_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, SKUs: 10, Reset: true, ResetDatabase: "other"})
			require.ErrorContains(t, err, "is not the database the DSN names")
			_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, SKUs: 10, Reset: true, ResetDatabase: b.db.Name})
			require.NoError(t, err)
			require.Equal(t, 10, b.count(t, `SELECT COUNT(*) FROM order_info`))
		})
	}
}

// Without any demo data ever made, a reset of a database holding orders is
// refused, and the marker table is not even created.
func TestDemoResetOfARealDatabaseChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO order_info (order_no, user_id, status, create_time, timeout_minutes) VALUES ('REAL-1', 7, 0, NOW(), 30)`)
	require.NoError(t, err)
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, Reset: true})
	var re *orderdemo.ResetError
	require.ErrorAs(t, err, &re)
	require.Contains(t, err.Error(), "order_info holds rows and demo-data never recorded any of its own here")
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'order_job_demo_batch'`))
}

// Demo orders would add stock to their SKUs: a stock row the generator did
// not make is never touched, reset or not.
func TestDemoNeverAddsToRealStock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.db.ExecContext(b.ctx, `INSERT INTO inventory (sku_id, available, locked) VALUES (3, 17, 2)`)
	require.NoError(t, err)
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, SKUs: 10})
	require.ErrorContains(t, err, "inventory has sku_id 3, which demo-data did not make")
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM order_info`))
	require.Equal(t, 17, b.count(t, `SELECT available FROM inventory WHERE sku_id = 3`))

	// SKUs beyond the real one's are fine, and later batches may reuse the demo's.
	_, err = b.db.ExecContext(b.ctx, `UPDATE inventory SET sku_id = 500 WHERE sku_id = 3`)
	require.NoError(t, err)
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, SKUs: 10})
	require.NoError(t, err)
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, SKUs: 10, Seed: 2})
	require.NoError(t, err)
	require.Equal(t, 17, b.count(t, `SELECT available FROM inventory WHERE sku_id = 500`))
}

// The generator reserves its id ranges before writing, so rows the shop
// writes meanwhile or afterwards never fall inside them (they would be
// taken for demo rows).
func TestDemoReservesItsIDRanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, SKUs: 10, CouponFraction: 0.3})
	require.NoError(t, err)
	require.Less(t, res.Coupons, 100)
	_, err = b.db.ExecContext(b.ctx, `INSERT INTO user_coupon (user_id, status) VALUES (7, 0)`)
	require.NoError(t, err)
	require.Greater(t, b.count(t, `SELECT MAX(id) FROM user_coupon`), 100, "past the whole reserved range, not just the coupons used")
	_, err = orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 10, SKUs: 10, Reset: true})
	var re *orderdemo.ResetError
	require.ErrorAs(t, err, &re, "the shop's coupon is not taken for a demo one")
	require.Equal(t, "user_coupon", re.Table)
}

// testBundle is a fresh database and the context the tests run in.
type testBundle struct {
	ctx context.Context
	db  *dbtest.DB
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{ctx: context.Background(), db: dbtest.New(t)}
}

func (b *testBundle) counts(t *testing.T) ordertest.StatusCounts {
	t.Helper()
	return ordertest.CountsOf(t, b.db)
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return b.db.Count(t, query, args...)
}
