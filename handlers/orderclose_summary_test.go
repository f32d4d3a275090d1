package handlers

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/xxljob"
)

// A run whose order locks Redis refused says so in the run log as a
// warning with Redis's own error (which names the address), not as a
// progress line: the run still succeeds, so the line is all an operator
// reading the admin UI's log sees of it.
func TestSummarizeWarnsWithTheRedisError(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	req := &xxljob.Request{Log: slog.New(slog.NewTextHandler(&log, nil))}
	refused := errors.New("dial tcp 127.0.0.1:6390: connect: connection refused")
	got := summarize(req, orders.RunStats{Scanned: 3, SkippedLocked: 3, LockErrors: 3, LockErr: refused})
	require.Contains(t, got, " lock_errors=3")
	out := log.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "could not reach Redis for 3 order lock(s) (dial tcp 127.0.0.1:6390: connect: connection refused)")
}
