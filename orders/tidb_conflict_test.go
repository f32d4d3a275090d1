package orders_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/orders"
)

// A TiDB write conflict (9007, raised here by a trigger on the real server
// with that number) is contention on TiDB: the close retries, then skips
// the orders for the next pass and the run goes on; the same number from a
// server that is not TiDB stops the run as a database error. Nothing is
// dead-lettered either way.
func TestTiDBWriteConflictIsSkippedNotFatal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server dbserver.Server
		stops  bool
	}{{dbserver.ServerTiDB, false}, {dbserver.ServerMariaDB, true}} {
		t.Run(tc.server.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res, base := b.Seed(t, orderdemo.Spec{Orders: 40, DueFraction: 1})
			_, err := b.DB.ExecContext(b.Ctx, `CREATE TRIGGER tr_conflict BEFORE INSERT ON order_close_log FOR EACH ROW
				SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 9007, MESSAGE_TEXT = 'Write conflict, txnStartTS=1, conflictStartTS=2'`)
			require.NoError(t, err)
			c, err := orders.NewCloser(b.DB.DB, b.Locker, orders.CloserConfig{Server: tc.server, PageSize: 10})
			require.NoError(t, err)
			st, err := c.Run(b.Ctx, orders.RunOptions{})
			if tc.stops {
				require.Error(t, err)
				require.Equal(t, dbserver.KindDatabase, tc.server.Kind(err))
			} else {
				require.NoError(t, err)
				require.Equal(t, res.Due, st.SkippedLocked, "every order skipped for the next pass")
			}
			require.Zero(t, st.Closed)
			require.Zero(t, st.DeadLettered)
			require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM order_dead_letter`))

			_, err = b.DB.ExecContext(b.Ctx, `DROP TRIGGER tr_conflict`)
			require.NoError(t, err)
			st, err = c.Run(b.Ctx, orders.RunOptions{})
			require.NoError(t, err)
			require.Equal(t, res.Due, st.Closed, "the next run closes them")
			b.Check(t, base)
		})
	}
}
