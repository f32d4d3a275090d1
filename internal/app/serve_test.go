package app

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// A stop asked for while serve is still starting (the signal arrives
// before the database answered) is a clean stop: no error, so the process
// exits 0 and the log says why it never served.
func TestServeStoppedDuringStartIsClean(t *testing.T) {
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
		v, ok := map[string]string{"XXL_JOB_ACCESS_TOKEN": "a-long-enough-token-0123", "MYSQL_DSN": "root@tcp(127.0.0.1:3306)/test"}[k]
		return v, ok
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log bytes.Buffer
	err = Serve(ctx, cfg, slog.New(slog.NewTextHandler(&log, nil)), Build{})
	require.NoError(t, err)
	require.Contains(t, log.String(), "stopped during start-up")
	require.Contains(t, log.String(), "context canceled")
}
