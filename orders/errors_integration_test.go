package orders_test

import (
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/orders"
)

// An error about the database rather than an order (a table renamed away, a
// column dropped, a privilege missing) stops the run whatever the page size:
// no order is dead-lettered, nothing changes, the error says what is wrong
// (Hint names the table, column or privilege), CloseOrder and CloseOrders
// return it as NotNow, and once the database is mended the next run closes
// every due order.
func TestDatabaseErrorsDeadLetterNothing(t *testing.T) {
	t.Parallel()
	type breakage struct {
		name     string
		hint     string
		breakFn  func(t *testing.T, b *testBundle) *sqlx.DB // returns the database to close with
		mendFunc func(t *testing.T, b *testBundle)
	}
	exec := func(t *testing.T, b *testBundle, stmt string) {
		t.Helper()
		_, err := b.DB.ExecContext(b.Ctx, stmt)
		require.NoError(t, err)
	}
	cases := []breakage{
		{
			name: "missing table",
			hint: "table order_close_log is missing: run executor migrate",
			breakFn: func(t *testing.T, b *testBundle) *sqlx.DB {
				exec(t, b, `RENAME TABLE order_close_log TO order_close_log_away`)
				return b.DB.DB
			},
			mendFunc: func(t *testing.T, b *testBundle) {
				exec(t, b, `RENAME TABLE order_close_log_away TO order_close_log`)
			},
		},
		{
			name: "unknown column",
			hint: "column close_reason is missing",
			breakFn: func(t *testing.T, b *testBundle) *sqlx.DB {
				exec(t, b, `ALTER TABLE order_info DROP COLUMN close_reason`)
				return b.DB.DB
			},
			mendFunc: func(t *testing.T, b *testBundle) {
				exec(t, b, `ALTER TABLE order_info ADD COLUMN close_reason VARCHAR(32) NULL`)
			},
		},
		{
			name: "privilege",
			hint: "may not INSERT on table order_close_log",
			breakFn: func(t *testing.T, b *testBundle) *sqlx.DB {
				var tables []string
				require.NoError(t, b.DB.SelectContext(b.Ctx, &tables, `SHOW TABLES`))
				var grants []string
				for _, tb := range tables {
					if tb == "order_close_log" {
						grants = append(grants, "SELECT, UPDATE ON "+tb)
					} else {
						grants = append(grants, "SELECT, INSERT, UPDATE, DELETE ON "+tb)
					}
				}
				db, err := sqlx.Open("mysql", b.DB.NewUser(t, grants...))
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				return db
			},
			mendFunc: func(*testing.T, *testBundle) {}, // the next run uses a user with every privilege
		},
	}
	for _, tc := range cases {
		for _, pageSize := range []int{1, 100} {
			t.Run(tc.name+"/page"+map[int]string{1: "1", 100: "100"}[pageSize], func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				res, base := b.Seed(t, orderdemo.Spec{Orders: 300, DueFraction: 0.9, PaidFraction: 0.1, CouponFraction: 0.3})
				var first []string
				require.NoError(t, b.DB.SelectContext(b.Ctx, &first,
					`SELECT order_no FROM order_info WHERE status = 0 ORDER BY id LIMIT 3`))

				db := tc.breakFn(t, b)
				c, err := orders.NewCloser(db, b.Locker, orders.CloserConfig{PageSize: pageSize})
				require.NoError(t, err)
				st, err := c.Run(b.Ctx, orders.RunOptions{})
				require.Error(t, err)
				t.Logf("run: %v; hint: %s", err, dbserver.Hint(err))
				require.Equal(t, dbserver.KindDatabase, dbserver.KindOf(err))
				require.True(t, dbserver.NotNow(err))
				require.Contains(t, dbserver.Hint(err), tc.hint)
				require.Zero(t, st.DeadLettered)
				require.Zero(t, st.Closed)

				out, err := c.CloseOrder(b.Ctx, first[0])
				require.Error(t, err)
				require.Zero(t, out)
				require.True(t, dbserver.NotNow(err), "%v", err)
				outs, err := c.CloseOrders(b.Ctx, first)
				require.Error(t, err)
				require.Nil(t, outs)
				require.True(t, dbserver.NotNow(err), "%v", err)

				require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`), "nothing dead-lettered")
				require.Zero(t, b.Counts(t).Closed)

				tc.mendFunc(t, b)
				st = b.run(t, orders.RunOptions{PageSize: pageSize})
				require.Equal(t, res.Due, st.Closed)
				require.Zero(t, st.DeadLettered)
				require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))
				b.Check(t, base)
			})
		}
	}
}

// A page whose batch fails on one order's data still closes the others and
// dead-letters only that order, also with a page of one.
func TestOrderErrorDeadLettersOnlyThatOrder(t *testing.T) {
	t.Parallel()
	for _, pageSize := range []int{1, 50} {
		b := setup(t)
		res, base := b.Seed(t, orderdemo.Spec{Orders: 120, DueFraction: 1})
		var victim string
		require.NoError(t, b.DB.GetContext(b.Ctx, &victim, `SELECT order_no FROM order_info ORDER BY id LIMIT 1 OFFSET 7`))
		// A value the column cannot hold: the release would push locked
		// below zero in an UNSIGNED-like check, here a CHECK constraint.
		_, err := b.DB.ExecContext(b.Ctx, `ALTER TABLE order_close_log ADD CONSTRAINT ck_not_victim CHECK (order_no <> '`+victim+`')`)
		require.NoError(t, err)
		st := b.run(t, orders.RunOptions{PageSize: pageSize})
		require.Equal(t, 1, st.DeadLettered, "page size %d", pageSize)
		require.Equal(t, res.Due-1, st.Closed)
		dl := b.deadLetters(t)[victim]
		require.Contains(t, dl.LastError, "ck_not_victim")
		require.Equal(t, "waiting", dl.Status)
		_, err = b.DB.ExecContext(b.Ctx, `ALTER TABLE order_close_log DROP CONSTRAINT ck_not_victim`)
		require.NoError(t, err)
		later := b.shiftedCloser(t, 10*time.Minute, orders.CloserConfig{})
		st, err = later.Run(b.Ctx, orders.RunOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, st.Closed)
		b.Check(t, base)
	}
}
