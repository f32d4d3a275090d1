package app

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders"
)

func TestCloseExtensions(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	logger := slog.New(slog.DiscardHandler)
	cfg := &config.Config{}
	cfg.Order.Compensation.Mode = "local"
	ext, err := newCloseExtensions(cfg, logger)
	require.NoError(t, err)
	require.Nil(t, ext.tradeCloser, "no closeURL: no payment step")
	require.Equal(t, orders.CompensateLocal, ext.compensation)
	relays, err := newRelays(cfg, db.DB, nil, logger)
	require.NoError(t, err)
	require.Nil(t, relays, "local mode: no relay")

	cfg.Order.Payment = config.OrderPayment{CloseURL: "http://pay.local/close", Timeout: time.Second, Retries: 1}
	cfg.Order.Compensation = config.OrderCompensation{Mode: "outbox", InventoryURL: "http://inv.local/r", CouponURL: "http://cpn.local/r"}
	ext, err = newCloseExtensions(cfg, logger)
	require.NoError(t, err)
	require.NotNil(t, ext.tradeCloser)
	require.Equal(t, orders.CompensateOutbox, ext.compensation)
	relays, err = newRelays(cfg, db.DB, nil, logger)
	require.NoError(t, err)
	require.Len(t, relays, 1, "mysql.dsn's database alone")
	require.Equal(t, "default", relays[0].Source)

	cfg.Order.Compensation.CouponURL = ""
	_, err = newRelays(cfg, db.DB, nil, logger)
	require.ErrorContains(t, err, "order.compensation")
}
