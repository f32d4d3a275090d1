package xxljob_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// bigLog is a handler that writes lines of about 100 bytes until its log
// holds at least size bytes.
func bigLog(size int) xxljob.Handler {
	return xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		pad := strings.Repeat("x", 60)
		for i := 0; i*100 < size; i++ {
			req.Logf("line %06d %s é", i, pad)
		}
		return nil
	})
}

// A finished run's log is read by the admin UI in one pull ("Load Log
// Finish"): the one /log answer must carry all of it.
func TestLogWholeFinishedLogInOneAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"big": bigLog(5 << 20)}})
	b.client.SetTimeout(adminWait()) // 5 MiB answers
	p := xxljobtest.Trigger(1, "big", nextLogID())
	b.run(t, p)
	// Writing 5 MiB of log lines took 5.9 s with -race in CI (the run
	// finished, code 200, after the usual 5 s wait had given up).
	b.callbackWithin(t, p.LogID, time.Minute)
	waitFor(t, func() bool { return strings.Contains(b.runLogNow(p), "callback finish") }, "the log's last line")
	file := b.runLog(t, p)
	require.Greater(t, len(file), 5<<20)

	finished := func() bool { _, ok := b.admin.Callback(p.LogID); return ok }
	res, err := b.client.PageLog(t.Context(), p.LogDateTime, p.LogID, xxljobtest.PageOptions{Finished: finished})
	require.NoError(t, err)
	require.Equal(t, 1, res.Polls, "the page of a finished run pulls once")
	require.True(t, res.End)
	require.Equal(t, len(file), len(res.Content), "the whole file in the one answer")
	require.Equal(t, file, res.Content)

	_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.Equal(t, strings.Count(file, "\n"), lr.ToLineNum)
}

// Past the executor's limit the answer stops at a whole line, says where
// the rest is, and a rolling page continues from the next line.
func TestLogReadLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"big": bigLog(200 << 10)},
		cfg: func(c *xxljob.Config) { c.LogReadLimit = limit }})
	p := xxljobtest.Trigger(1, "big", nextLogID())
	b.run(t, p)
	b.callback(t, p.LogID)
	waitFor(t, func() bool { return strings.Contains(b.runLogNow(p), "callback finish") }, "the log's last line")
	file := b.runLog(t, p)
	lines := strings.SplitAfter(file, "\n")
	lines = lines[:len(lines)-1]

	_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	sent := strings.Join(lines[:lr.ToLineNum], "")
	require.LessOrEqual(t, len(sent), limit)
	require.Greater(t, len(sent)+len(lines[lr.ToLineNum]), limit, "stopped only at the limit")
	require.True(t, strings.HasPrefix(lr.LogContent, sent))
	note := strings.TrimPrefix(lr.LogContent, sent)
	require.Contains(t, note, fmt.Sprintf("cut at the executor's limit of %d bytes after line %d of %d", len(sent), lr.ToLineNum, len(lines)))
	require.Contains(t, note, logFile(b.logPath, p.LogDateTime, p.LogID), "names the file")
	require.Equal(t, 1, strings.Count(note, "\n"), "the note is one line")

	// The next pull starts where the first stopped.
	_, lr2, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, lr.ToLineNum+1)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(lr2.LogContent, lines[lr.ToLineNum]))
}

// One line longer than the limit is cut inside it rather than never sent.
func TestLogReadLimitLongLine(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"long": xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		req.Logf("%s", strings.Repeat("y", 10000))
		return nil
	})}, cfg: func(c *xxljob.Config) { c.LogReadLimit = 1000 }})
	p := xxljobtest.Trigger(1, "long", nextLogID())
	b.run(t, p)
	b.callback(t, p.LogID)
	_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 3)
	require.NoError(t, err)
	require.Equal(t, 3, lr.ToLineNum)
	require.Contains(t, lr.LogContent, strings.Repeat("y", 900))
	require.Contains(t, lr.LogContent, "cut at the executor's limit of 1000 bytes after line 3")
}

// Line endings and bytes a handler may write: CRLF lines, invalid UTF-8, a
// last line without its break, quotes and control characters: the answer is
// valid JSON carrying the lines as the Java executor reads them.
func TestLogContentEncoding(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	p := xxljobtest.Trigger(1, "none", nextLogID())
	path := logFile(b.logPath, p.LogDateTime, p.LogID)
	require.NoError(t, os.MkdirAll(path[:strings.LastIndexByte(path, '/')], 0o755))
	raw := "a\r\n\"b\"\\\t\x01\n\xff\xfe ok é\nlast"
	require.NoError(t, os.WriteFile(path, []byte(raw), 0o644))
	_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.Equal(t, xxljobtest.LogResult{FromLineNum: 1, ToLineNum: 4,
		LogContent: "a\n\"b\"\\\t\x01\n\ufffd\ufffd ok é\nlast\n"}, *lr)
	_, lr, err = b.client.Log(t.Context(), p.LogDateTime, p.LogID, 5)
	require.NoError(t, err)
	require.Equal(t, xxljobtest.LogResult{FromLineNum: 5, ToLineNum: 4}, *lr, "past the end: from > to")
}

// The admin UI asks for a run's log right after /run, before the run has
// written anything. Java answers isEnd (its file does not exist) and the UI
// stops rolling that log; for a run accepted here and not finished the
// answer is "not ended, nothing yet" until the file exists. A logId this
// executor knows nothing about keeps the Java answer.
func TestLogBeforeTheFileExists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version xxljob.AdminVersion
		admin   xxljobtest.Version
	}{
		{xxljob.Admin2x, xxljobtest.V24},
		{xxljob.Admin34, xxljobtest.V34},
		{xxljob.AdminMain, xxljobtest.Main},
	} {
		t.Run(string(tc.version), func(t *testing.T) {
			t.Parallel()
			g := newGate()
			admin := xxljobtest.New(t, xxljobtest.Options{Version: tc.admin, Token: "T", Groups: map[string]string{"test-executor": "T"}})
			b := setup(t, opts{admin: admin, token: "T", version: tc.version, adminVersion: tc.admin,
				handlers: map[string]xxljob.Handler{"block": g.handler()}})
			t.Cleanup(g.open)

			// The first run holds the job thread; the second waits in its queue.
			running, queued := b.holdThread(t, g)
			// The admin's /log sends the trigger time to the second (it
			// stored a DATETIME), /run sent its milliseconds.
			for i, from := range []int{1, 7} {
				at := queued.LogDateTime - int64(i)*(queued.LogDateTime%1000)
				env, lr, err := b.client.Log(t.Context(), at, queued.LogID, from)
				require.NoError(t, err)
				require.Equal(t, 200, env.Code, "%s", env.Raw)
				require.NotNil(t, lr, "%s", env.Raw)
				require.Equal(t, xxljobtest.LogResult{FromLineNum: from}, *lr, "a queued run's log is not ended: %s", env.Raw)
			}
			_, lr, err := b.client.Log(t.Context(), running.LogDateTime, running.LogID, 1)
			require.NoError(t, err)
			require.False(t, lr.IsEnd)
			require.Contains(t, lr.LogContent, "job execute start")

			unknown := nextLogID()
			_, lr, err = b.client.Log(t.Context(), queued.LogDateTime, unknown, 3)
			require.NoError(t, err)
			require.Equal(t, xxljobtest.LogResult{FromLineNum: 3, LogContent: "readLog fail, logFile not exists", IsEnd: true}, *lr)
			// The queued run's logId on another day is not that run: the
			// trigger time names the run as much as the logId does.
			_, lr, err = b.client.Log(t.Context(), queued.LogDateTime-86400000, queued.LogID, 1)
			require.NoError(t, err)
			require.Equal(t, xxljobtest.LogResult{FromLineNum: 1, LogContent: "readLog fail, logFile not exists", IsEnd: true}, *lr)

			// Once the queued run began, its file answers as any other.
			g.open()
			b.callback(t, queued.LogID)
			_, lr, err = b.client.Log(t.Context(), queued.LogDateTime, queued.LogID, 1)
			require.NoError(t, err)
			require.False(t, lr.IsEnd)
			require.Contains(t, lr.LogContent, "job execute start")
		})
	}
}
