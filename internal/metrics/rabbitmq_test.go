package metrics_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/metrics"
)

// TestRabbitMQTimerFamilies pins the RabbitMQ timer's families (names,
// help, types) as dashboards read them, for a timer never started: all 0.
func TestRabbitMQTimerFamilies(t *testing.T) {
	t.Parallel()
	db := sqlx.NewDb(sql.OpenDB(neverConnector{}), "mysql") // the timer is not started: no query
	defer db.Close()
	timer, err := delay.NewRabbitMQTimer(db, delay.RabbitMQConfig{URL: "amqp://guest:guest@127.0.0.1:1/"})
	require.NoError(t, err)
	m := metrics.New(metrics.Config{})
	m.WatchRabbitMQTimer(timer)
	want := map[string]string{
		metrics.DelayRabbitMQConnected:       "GAUGE 1 while the RabbitMQ timer's connections are up with their topology declared (the consumer's too, while the dispatcher runs).",
		metrics.DelayRabbitMQHeld:            "GAUGE Messages this dispatcher holds unacknowledged: due within a second, or being run.",
		metrics.DelayRabbitMQPublishedTotal:  "COUNTER Delayed-task messages the broker confirmed (registrations, rescheduling, the reconciler).",
		metrics.DelayRabbitMQRepublished:     "COUNTER Of those, published again by the reconciler (never confirmed, or overdue and long published).",
		metrics.DelayRabbitMQHopsTotal:       "COUNTER Messages sent on to their next delay tier.",
		metrics.DelayRabbitMQDuplicatesTotal: "COUNTER Messages of tasks already claimed or no longer PENDING, dropped at the claim.",
		metrics.DelayRabbitMQFailuresTotal:   "COUNTER Publishes the broker did not confirm; their tasks wait for the reconciler.",
		metrics.DelayRabbitMQReconnectsTotal: "COUNTER Connections to RabbitMQ re-established after a loss.",
	}
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "delay_rabbitmq_") {
			continue
		}
		got[mf.GetName()] = mf.GetType().String() + " " + mf.GetHelp()
		require.Len(t, mf.GetMetric(), 1, mf.GetName())
		s := mf.GetMetric()[0]
		require.Empty(t, s.GetLabel(), mf.GetName())
		require.Zero(t, s.GetGauge().GetValue()+s.GetCounter().GetValue(), mf.GetName())
	}
	require.Equal(t, want, got)
}

// neverConnector is a driver.Connector that never connects.
type neverConnector struct{}

func (neverConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("no database in this test")
}
func (neverConnector) Driver() driver.Driver { return nil }
