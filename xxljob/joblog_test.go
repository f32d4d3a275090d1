package xxljob_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestLogPagingMidRunAndAfter(t *testing.T) {
	t.Parallel()
	g := newGate()
	h := xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		req.Logf("step %d", 1)
		req.Logf("step %d\nwith a second line", 2)
		return g.handler().Handle(ctx, req)
	})
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"h": h}})
	t.Cleanup(g.open)
	p := xxljobtest.Trigger(1, "h", nextLogID())
	p.ExecutorParams = "p=1"
	b.run(t, p)
	g.waitStarted(t, p.LogID)

	// Mid-run: lines 1..5, isEnd false.
	env, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	require.Equal(t, xxljobtest.LogResult{FromLineNum: 1, ToLineNum: 5, LogContent: lr.LogContent, IsEnd: false}, *lr)
	lines := strings.SplitAfter(lr.LogContent, "\n")
	require.Len(t, lines, 6) // 5 lines and "" after the last "\n"
	require.True(t, strings.HasSuffix(lines[0], " [INFO] ----------- xxl-job job execute start -----------\n"), lines[0])
	require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[INFO\] `, lines[0])
	require.True(t, strings.HasSuffix(lines[1], "----------- Param:p=1\n"))
	require.True(t, strings.HasSuffix(lines[2], "step 1\n"))
	require.True(t, strings.HasSuffix(lines[3], "step 2\n"))
	require.Equal(t, "with a second line\n", lines[4])

	// From a later line: only what follows; past the end: nothing new.
	_, lr, err = b.client.Log(t.Context(), p.LogDateTime, p.LogID, 4)
	require.NoError(t, err)
	require.Equal(t, 5, lr.ToLineNum)
	require.Equal(t, lines[3]+lines[4], lr.LogContent)
	_, lr, err = b.client.Log(t.Context(), p.LogDateTime, p.LogID, 6)
	require.NoError(t, err)
	require.Equal(t, xxljobtest.LogResult{FromLineNum: 6, ToLineNum: 5}, *lr, "from > to: nothing new")

	// After the end: end lines, then the callback line.
	g.open()
	b.callback(t, p.LogID)
	waitFor(t, func() bool {
		_, lr, err = b.client.Log(t.Context(), p.LogDateTime, p.LogID, 6)
		return err == nil && strings.Contains(lr.LogContent, "callback finish")
	}, "callback line in the log")
	require.False(t, lr.IsEnd)
	require.Contains(t, lr.LogContent, "----------- xxl-job job execute end(finish) -----------\n")
	require.Contains(t, lr.LogContent, "----------- Result: handleCode=200, handleMsg = released\n")
	require.Equal(t, b.runLog(t, p), strings.Join(lines[:5], "")+lr.LogContent)
}

func TestLogPageLikeAdminUI(t *testing.T) {
	t.Parallel()
	g := newGate()
	h := xxljob.HandlerFunc(func(ctx context.Context, req *xxljob.Request) error {
		for i := range 3 {
			req.Logf("tick %d", i)
		}
		<-g.release
		req.Logf("done")
		return nil
	})
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"h": h}})
	t.Cleanup(g.open)
	p := xxljobtest.Trigger(1, "h", nextLogID())
	b.run(t, p)

	finished := func() bool { _, ok := b.admin.Callback(p.LogID); return ok }
	// The page opens while the run is going on: its first look at the
	// result comes before the gate opens.
	opened := make(chan struct{})
	var openOnce sync.Once
	pageFinished := func() bool {
		done := finished()
		openOnce.Do(func() { close(opened) })
		return done
	}
	type page struct {
		res xxljobtest.PageResult
		err error
	}
	pages := make(chan page, 1)
	go func() {
		res, err := b.client.PageLog(t.Context(), p.LogDateTime, p.LogID,
			xxljobtest.PageOptions{Interval: 5 * time.Millisecond, MaxIdlePolls: 10000, Finished: pageFinished})
		pages <- page{res, err}
	}()
	waitFor(t, func() bool {
		_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
		return err == nil && strings.Contains(lr.LogContent, "tick 2")
	}, "running log visible")
	select {
	case <-opened:
	case <-time.After(waitLong):
		t.Fatal("the log page did not open")
	}
	g.open()
	pg := <-pages
	require.NoError(t, pg.err)
	require.True(t, pg.res.End, "stopped on the admin's end condition")
	require.Greater(t, pg.res.Polls, 1)
	file := b.runLog(t, p)
	require.True(t, strings.HasPrefix(file, pg.res.Content), "the page shows the file from line 1")
	require.Contains(t, pg.res.Content, "tick 0")
	require.Contains(t, pg.res.Content, "[INFO] done\n")
	require.Contains(t, pg.res.Content, "execute end(finish)")

	// Opened after the end: one pull.
	res, err := b.client.PageLog(t.Context(), p.LogDateTime, p.LogID, xxljobtest.PageOptions{Finished: finished})
	require.NoError(t, err)
	require.Equal(t, 1, res.Polls)
	require.True(t, strings.HasPrefix(file, res.Content) || strings.HasPrefix(res.Content, file))
}

func TestLogCleanup(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	today := time.Now().Format("2006-01-02")
	old := time.Now().AddDate(0, 0, -8).Format("2006-01-02")
	recent := time.Now().AddDate(0, 0, -6).Format("2006-01-02")
	for _, d := range []string{"2000-01-01", old, recent, today, "callbacklog", "not-a-date", "gluesource"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	b := setup(t, opts{logPath: root, cfg: func(c *xxljob.Config) { c.LogRetentionDays = 7 }})
	_ = b
	waitFor(t, func() bool {
		_, err1 := os.Stat(filepath.Join(root, "2000-01-01"))
		_, err2 := os.Stat(filepath.Join(root, old))
		return os.IsNotExist(err1) && os.IsNotExist(err2)
	}, "old log folders removed")
	for _, d := range []string{recent, today, "callbacklog", "not-a-date", "gluesource"} {
		require.DirExists(t, filepath.Join(root, d))
	}
}

func TestLogCleanupDisabled(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "2000-01-01"), 0o755))
	b := setup(t, opts{logPath: root, cfg: func(c *xxljob.Config) { c.LogRetentionDays = 2 }})
	_, err := b.admin.WaitRegistrations(2, waitLong) // the executor has been running a while
	require.NoError(t, err)
	require.DirExists(t, filepath.Join(root, "2000-01-01"))
}
