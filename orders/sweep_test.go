package orders_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/orderlock"
)

// sweepSource is one order database of a sweep test: its orders split
// over tables, and a Closer per table.
type sweepSource struct {
	name   string
	db     *sqlx.DB
	tables []string
	units  []*orders.Closer
}

// sweepWorld makes sources databases on the shared server, each with
// perTable due orders in each of its tables (orderdemo.SplitTables), and
// the Closers of every unit on one locker.
func sweepWorld(t *testing.T, sources, tables, perTable int) ([]*sweepSource, []*orders.Closer) {
	t.Helper()
	locker := lockerOf(t)
	var out []*sweepSource
	var units []*orders.Closer
	for i := range sources {
		s := &sweepSource{name: fmt.Sprintf("db%d", i), db: dbtest.New(t).DB}
		seedSplit(t, s, tables, perTable)
		s.units = unitsOf(t, s, locker)
		units = append(units, s.units...)
		out = append(out, s)
	}
	return out, units
}

func seedSplit(t *testing.T, s *sweepSource, tables, perTable int) {
	t.Helper()
	ctx := context.Background()
	_, err := orderdemo.Generate(ctx, s.db, orderdemo.Spec{Orders: tables * perTable, SKUs: 50, DueFraction: 1,
		CouponFraction: 0.3, OrderNoPrefix: "O" + s.name})
	require.NoError(t, err)
	s.tables = []string{"order_info"}
	if tables > 1 {
		s.tables, err = orderdemo.SplitTables(ctx, s.db, tables)
		require.NoError(t, err)
	}
}

func unitsOf(t *testing.T, s *sweepSource, locker *orderlock.Locker) []*orders.Closer {
	t.Helper()
	var units []*orders.Closer
	for _, table := range s.tables {
		c, err := orders.NewCloser(s.db, locker, unitConfig(t, s.name, table))
		require.NoError(t, err)
		units = append(units, c)
	}
	return units
}

// checkAllClosedOnce checks that every order of s's tables is closed,
// each exactly once (one close-log row), and that all stock and coupons
// the orders held are back.
func (s *sweepSource) checkAllClosedOnce(t *testing.T, perTable int) {
	t.Helper()
	for _, table := range s.tables {
		var open int
		require.NoError(t, s.db.Get(&open, "SELECT COUNT(*) FROM "+table+" WHERE status <> 2"))
		require.Zero(t, open, "%s/%s: orders left open", s.name, table)
	}
	var logged, locked, used int
	require.NoError(t, s.db.Get(&logged, "SELECT COUNT(*) FROM order_close_log"))
	require.Equal(t, perTable*len(s.tables), logged, "%s: one close per order", s.name)
	require.NoError(t, s.db.Get(&locked, "SELECT COALESCE(SUM(locked), 0) FROM inventory"))
	require.Zero(t, locked, "%s: locked stock given back", s.name)
	require.NoError(t, s.db.Get(&used, "SELECT COUNT(*) FROM user_coupon WHERE status = 1"))
	require.Zero(t, used, "%s: coupons given back", s.name)
}

// 2 databases x 3 tables, 1 to 4 broadcast executors running at once:
// every due order is closed exactly once, each executor's run names the
// units it took, and the executors' counts are within 15% of their mean.
func TestSweepClosesEveryUnitOnceBalanced(t *testing.T) {
	t.Parallel()
	const perTable = 240
	for executors := 1; executors <= 4; executors++ {
		t.Run(fmt.Sprintf("%d executors", executors), func(t *testing.T) {
			t.Parallel()
			sources, units := sweepWorld(t, 2, sweepTables, perTable)
			sweep, err := orders.NewSweep(units...)
			require.NoError(t, err)
			closed := make([]int, executors)
			var wg sync.WaitGroup
			for i := range executors {
				wg.Go(func() {
					res := sweep.Run(context.Background(), orders.SweepOptions{RunOptions: orders.RunOptions{
						ShardIndex: i, ShardTotal: executors, PageSize: 50}})
					if err := res.Err(); err != nil {
						t.Errorf("executor %d: %v", i, err)
					}
					closed[i] = res.Total.Closed
				})
			}
			wg.Wait()
			total := 0
			for _, s := range sources {
				s.checkAllClosedOnce(t, perTable)
				total += perTable * len(s.tables)
			}
			sum, most := 0, 0
			for _, n := range closed {
				sum, most = sum+n, max(most, n)
			}
			require.Equal(t, total, sum, "closed per executor %v", closed)
			require.LessOrEqual(t, float64(most)*float64(executors)/float64(sum), 1.15, "closed per executor %v", closed)
		})
	}
}

// Each unit's run is recorded in its own database, naming its source and
// table, and the sweep's result names every unit this executor took.
func TestSweepRecordsEachUnit(t *testing.T) {
	t.Parallel()
	sources, units := sweepWorld(t, 2, sweepTables, 20)
	sweep, err := orders.NewSweep(units...)
	require.NoError(t, err)
	var done []string
	res := sweep.Run(context.Background(), orders.SweepOptions{
		RunOptions: orders.RunOptions{ShardIndex: 0, ShardTotal: 2, Source: "test"},
		UnitDone:   func(u orders.UnitRun) { done = append(done, u.Name()) },
	})
	require.NoError(t, res.Err())
	var names []string
	for _, u := range res.Units {
		names = append(names, u.Name())
	}
	require.ElementsMatch(t, names, done)
	require.Len(t, names, len(units)/2, "whole units, half each")
	for _, s := range sources {
		runs, err := inspect.NewCloseRuns(s.db).Recent(context.Background(), 0, 10)
		require.NoError(t, err)
		for _, r := range runs {
			require.Equal(t, s.name, r.OrderSource)
			require.Contains(t, names, r.OrderSource+"/"+r.OrderTable)
		}
	}
	_, err = orders.NewSweep(units[0], units[0])
	require.EqualError(t, err, fmt.Sprintf("orders: unit %s/%s given twice", units[0].Source(), units[0].Table()))
}

// A unit whose table is missing fails alone, with the server's message;
// the other units of its database and of the other database finish.
func TestSweepMissingTableFailsItsUnitOnly(t *testing.T) {
	t.Parallel()
	sources, units := sweepWorld(t, 2, sweepTables, 30)
	_, err := sources[1].db.Exec("DROP TABLE " + sources[1].tables[1])
	require.NoError(t, err)
	sweep, err := orders.NewSweep(units...)
	require.NoError(t, err)
	res := sweep.Run(context.Background(), orders.SweepOptions{RunOptions: orders.RunOptions{ShardTotal: 1}})
	failed := res.Failed()
	require.Len(t, failed, 1)
	require.Equal(t, "db1/"+sources[1].tables[1], failed[0].Name())
	require.ErrorContains(t, failed[0].Err, "doesn't exist")
	require.Equal(t, dbserver.KindDatabase, dbserver.KindOf(failed[0].Err))
	require.Equal(t, 30*(len(units)-1), res.Total.Closed)
}
