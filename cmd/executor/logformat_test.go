package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// serve with log.format text: short lines, the first one without the
// configuration, and every line tagged with one component only (the
// dispatcher's included, which once carried "delay" and
// "delay.dispatcher").
func TestServeTextLogLines(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{"LOG_FORMAT": "text", "XXL_JOB_EXECUTOR_ENABLED": "false"})
	runDelayTask(t, p, db, "log-1")
	p.shutdown(t)

	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	require.True(t, strings.HasPrefix(lines[0], "time="), lines[0])
	require.Contains(t, lines[0], `msg="starting executor"`)
	require.Less(t, len(lines[0]), 300, lines[0])
	dispatcher := 0
	for _, l := range lines {
		require.False(t, strings.HasPrefix(l, "{"), "a JSON line in text mode: %s", l)
		require.NotContains(t, l, " config.", "the configuration is logged at debug in text mode: %s", l)
		require.LessOrEqual(t, strings.Count(l, " component="), 1, l)
		if strings.Contains(l, "component=delay.dispatcher") {
			dispatcher++
		}
	}
	require.Positive(t, dispatcher, "the dispatcher logged: %s", p.stdout.String())
}

// In JSON (the default on anything but a terminal) the configuration has a
// line of its own after the start line.
func TestServeJSONLogsTheConfiguration(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	p := launchServe(t, db.DSN, redistest.Addr(), prefix, map[string]string{"XXL_JOB_EXECUTOR_ENABLED": "false"})
	runDelayTask(t, p, db, "log-2")
	p.shutdown(t)
	recs := p.logLines(t)
	require.Equal(t, "starting executor", recs[0]["msg"])
	require.NotContains(t, recs[0], "config")
	require.Equal(t, "configuration", recs[1]["msg"])
	require.Contains(t, recs[1], "config")
}

// runDelayTask waits for serve to be ready, registers a delayed task for an
// order that does not exist over the API port and waits for the
// dispatcher to take it.
func runDelayTask(t *testing.T, p *serveProcess, db *dbtest.DB, biz string) {
	t.Helper()
	require.Eventually(t, func() bool { code, _ := readyz(t, p, ""); return code == http.StatusOK }, 20*time.Second, 50*time.Millisecond)
	postTask(t, p, `{"bizUuid":"`+biz+`","handler":"orderTimeoutClose","delayMs":0,"payload":{"orderNo":"NOPE"}}`)
	require.Eventually(t, func() bool {
		var status string
		_ = db.Get(&status, "SELECT status FROM job_delay_task WHERE biz_uuid = ?", biz)
		return status != "" && status != "PENDING"
	}, 20*time.Second, 50*time.Millisecond, "the dispatcher never took the task")
}
