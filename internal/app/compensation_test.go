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
	ext, err := newCloseExtensions(db.DB, cfg, logger)
	require.NoError(t, err)
	require.Nil(t, ext.tradeCloser, "no closeURL: no payment step")
	require.Nil(t, ext.relay)
	require.Equal(t, orders.CompensateLocal, ext.compensation)

	cfg.Order.Payment = config.OrderPayment{CloseURL: "http://pay.local/close", Timeout: time.Second, Retries: 1}
	cfg.Order.Compensation = config.OrderCompensation{Mode: "outbox", InventoryURL: "http://inv.local/r", CouponURL: "http://cpn.local/r"}
	ext, err = newCloseExtensions(db.DB, cfg, logger)
	require.NoError(t, err)
	require.NotNil(t, ext.tradeCloser)
	require.NotNil(t, ext.relay)
	require.Equal(t, orders.CompensateOutbox, ext.compensation)

	cfg.Order.Compensation.CouponURL = ""
	_, err = newCloseExtensions(db.DB, cfg, logger)
	require.ErrorContains(t, err, "order.compensation")
}
