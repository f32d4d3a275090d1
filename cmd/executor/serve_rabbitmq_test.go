package main

import (
	"net/http"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/metrics"
	"github.com/orderjob/executor/internal/metricstest"
	"github.com/orderjob/executor/internal/rabbittest"
	"github.com/orderjob/executor/internal/redistest"
)

// delay.timer rabbitmq: readiness includes the broker, a task registered
// over the API port hops through a tier and runs, the metrics show the
// timer, and the task's published_at records the broker's confirm.
func TestServeWithRabbitMQTimer(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	rprefix := rabbittest.Prefix(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{
		"DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": rabbittest.URL(), "DELAY_RABBITMQ_PREFIX": rprefix,
	})
	var checks map[string]string
	require.Eventually(t, func() bool {
		var code int
		code, checks = readyz(t, p, "")
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "ok", checks["rabbitmq"])

	postTask(t, p, `{"bizUuid":"mq-1","handler":"orderTimeoutClose","delayMs":1500,"payload":{"orderNo":"NOPE"}}`)
	require.Eventually(t, func() bool {
		var status string
		_ = db.Get(&status, "SELECT status FROM job_delay_task WHERE biz_uuid = 'mq-1'")
		return status != "" && status != "PENDING"
	}, 20*time.Second, 50*time.Millisecond, "the dispatcher never took the task")
	s := metricstest.Scrape(t, p.apiURL+"/metrics")
	v, ok := s.Value(metrics.DelayRabbitMQConnected)
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	v, _ = s.Value(metrics.DelayRabbitMQPublishedTotal)
	require.Equal(t, 1.0, v)
}

// A queue of the timer's name with other arguments (a classic queue where
// it declares a quorum queue) fails readiness, saying which and why; the
// executor still serves, and tasks wait in the table.
func TestServeReadinessFailsOnRabbitMQConflict(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	rprefix := rabbittest.Prefix(t)
	conn, err := amqp.Dial(rabbittest.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(rprefix+"ready", true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	require.NoError(t, err)

	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{
		"DELAY_TIMER": "rabbitmq", "DELAY_RABBITMQ_URL": rabbittest.URL(), "DELAY_RABBITMQ_PREFIX": rprefix,
	})
	var code int
	var checks map[string]string
	require.Eventually(t, func() bool {
		code, checks = readyz(t, p, "")
		return code != 0
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, checks["rabbitmq"], "conflicts with what the broker holds")
	require.Contains(t, checks["rabbitmq"], rprefix+"ready")
	require.Equal(t, "ok", checks["mysql"])

	postTask(t, p, `{"bizUuid":"mq-waits","handler":"orderTimeoutClose","delayMs":0,"payload":{"orderNo":"NOPE"}}`)
	var status string
	require.NoError(t, db.Get(&status, "SELECT status FROM job_delay_task WHERE biz_uuid = 'mq-waits'"))
	require.Equal(t, "PENDING", status)
}
