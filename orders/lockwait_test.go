package orders_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
	"github.com/orderjob/executor/orders/payment"
)

// A close whose lease runs out while its page waits on a stock row leaves
// no row locked behind it. The driver drops the connection when the page's
// context ends, but the server would keep the transaction, and the order
// rows it already updated, until its lock wait ended: 50 s by default,
// while payments of those orders wait. The close caps its sessions' lock
// wait at its deadline, so the order row is free again well before a
// waiter's 15 s run out.
func TestCloseCutByItsLeaseLeavesNoRowLocked(t *testing.T) {
	t.Parallel()
	b := setup(t, paytest.WithLocker(orderlock.Config{TTL: time.Second}))
	server, err := dbserver.DetectServer(b.Ctx, b.DB)
	require.NoError(t, err)
	require.NotEqual(t, dbserver.ServerUnknown, server)
	late := b.shiftedCloser(t, 31*time.Minute, orders.CloserConfig{Server: server})
	b.Shop(t)
	require.NoError(t, b.Svc.AddStock(b.Ctx, 9999, 10))
	b.Place(t, "STUCK", false, payment.Item{SKUID: 9999, Quantity: 1})

	holder, err := b.DB.BeginTxx(b.Ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback() })
	_, err = holder.ExecContext(b.Ctx, `SELECT * FROM inventory WHERE sku_id = 9999 FOR UPDATE`)
	require.NoError(t, err)

	out, err := late.CloseOrder(b.Ctx, "STUCK")
	require.NoError(t, err)
	require.Equal(t, orders.OutcomeSkippedLocked, out)

	// The holder still holds the stock row: only the cap ends the close's
	// server-side wait, and with it the lock on the order row.
	probe, err := b.DB.Connx(b.Ctx)
	require.NoError(t, err)
	defer probe.Close()
	_, err = probe.ExecContext(b.Ctx, `SET SESSION innodb_lock_wait_timeout = 15`)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	tx, err := probe.BeginTxx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var status int
	require.NoError(t, tx.GetContext(ctx, &status, `SELECT status FROM order_info WHERE order_no = 'STUCK' FOR UPDATE`),
		"the order row is still locked by the close that gave up")
	require.Equal(t, 0, status, "not closed")
}
