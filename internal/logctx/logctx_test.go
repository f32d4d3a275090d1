package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
)

// Lines written under a run's context get its job_id and log_id once, even
// when the logger or the call already carries one of them; other lines get
// nothing.
func TestCtxHandlerTagsRunLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	e, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/x"}, AppName: "logctx", LogPath: t.TempDir()})
	require.NoError(t, err)
	var logID int64
	require.NoError(t, e.Register("logs", xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		logID = req.LogID
		log.InfoContext(ctx, "plain")
		log.With("log_id", req.LogID).InfoContext(ctx, "with")
		log.InfoContext(ctx, "attr", "job_id", 0)
		log.WithGroup("g").InfoContext(ctx, "group")
		return nil
	})))
	res, err := e.RunOnce(t.Context(), "logs", "", 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, xxljob.CodeSuccess, res.Code)
	log.InfoContext(t.Context(), "outside")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 5)
	for _, l := range lines[:3] {
		require.Equal(t, 1, strings.Count(l, `"job_id":`), l)
		require.Equal(t, 1, strings.Count(l, `"log_id":`), l)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		require.Equal(t, float64(logID), m["log_id"], l)
	}
	require.Contains(t, lines[3], `"g":{"job_id":0,"log_id":`, "inside a group, the attributes go with it")
	require.NotContains(t, lines[4], "job_id")
	require.NotContains(t, lines[4], "log_id")
}
