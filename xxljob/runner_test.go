package xxljob_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestRunRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"ok": okHandler("")}})

	p := xxljobtest.Trigger(1, "nope", nextLogID())
	env, err := b.client.Run(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, `{"code":500,"msg":"job handler [nope] not found."}`, string(env.Raw))

	// Absent executorParams mean "".
	id := nextLogID()
	env, err = b.client.Post(t.Context(), "run", fmt.Appendf(nil, `{"jobId":2,"executorHandler":"ok","glueType":"BEAN","logId":%d,"logDateTime":1700000000123}`, id))
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	require.Equal(t, 200, b.callback(t, id).HandleCode)
	require.Len(t, b.admin.Callbacks(), 1, "no callback for refused triggers")
}

// Only BEAN runs. The refusal of any other glueType is Java's text of that
// generation: GlueTypeEnum.match finds no type for an absent, empty or
// unknown one ("glueType[null] is not valid.", never taken for BEAN), and
// the branch after 3.4 refuses a GLUE type with glueenabled off as
// "fail, current glue type [GLUE(Shell)] not supported.".
func TestRunGlueRefusals(t *testing.T) {
	t.Parallel()
	glue := func(s string) string { return `,"glueType":` + s }
	for _, tc := range []struct {
		version xxljob.AdminVersion
		admin   xxljobtest.Version
		glue    map[string]string // the glueType field (none, null, a string) → msg
	}{
		{xxljob.Admin2x, xxljobtest.V24, map[string]string{
			"": "glueType[null] is not valid.", glue("null"): "glueType[null] is not valid.", glue(`""`): "glueType[] is not valid.",
			glue(`"bean"`): "glueType[bean] is not valid.", glue(`"GLUE_GROOVY"`): "glueType[GLUE_GROOVY] is not valid.",
			glue(`"GLUE_SHELL"`): "glueType[GLUE_SHELL] is not valid.", glue(`"GLUE_PYTHON2"`): "glueType[GLUE_PYTHON2] is not valid.",
		}},
		{xxljob.Admin34, xxljobtest.V34, map[string]string{
			"": "glueType[null] is not valid.", glue(`""`): "glueType[] is not valid.",
			glue(`"GLUE_SHELL"`): "glueType[GLUE_SHELL] is not valid.", glue(`"GLUE_PYTHON"`): "glueType[GLUE_PYTHON] is not valid.",
		}},
		{xxljob.AdminMain, xxljobtest.Main, map[string]string{
			"": "glueType[null] is not valid.", glue(`""`): "glueType[] is not valid.", glue(`"bean"`): "glueType[bean] is not valid.",
			glue(`"GLUE_GROOVY"`):     "fail, current glue type [GLUE(Java)] not supported.",
			glue(`"GLUE_SHELL"`):      "fail, current glue type [GLUE(Shell)] not supported.",
			glue(`"GLUE_PYTHON"`):     "fail, current glue type [GLUE(Python3)] not supported.",
			glue(`"GLUE_PYTHON2"`):    "fail, current glue type [GLUE(Python2)] not supported.",
			glue(`"GLUE_NODEJS"`):     "fail, current glue type [GLUE(Nodejs)] not supported.",
			glue(`"GLUE_POWERSHELL"`): "fail, current glue type [GLUE(PowerShell)] not supported.",
			glue(`"GLUE_PHP"`):        "fail, current glue type [GLUE(PHP)] not supported.",
		}},
	} {
		t.Run(string(tc.version), func(t *testing.T) {
			t.Parallel()
			admin := xxljobtest.New(t, xxljobtest.Options{Version: tc.admin, Token: "T", Groups: map[string]string{"test-executor": "T"}})
			b := setup(t, opts{admin: admin, token: "T", version: tc.version, adminVersion: tc.admin,
				handlers: map[string]xxljob.Handler{"ok": okHandler("")}})
			path := "run"
			if tc.admin == xxljobtest.Main {
				path = "trigger"
			}
			for field, msg := range tc.glue {
				body := fmt.Appendf(nil, `{"jobId":1,"executorHandler":"ok","logId":%d,"logDateTime":1700000000123,"glueSource":"rm -rf /"%s}`, nextLogID(), field)
				env, err := b.client.Post(t.Context(), path, body)
				require.NoError(t, err)
				require.Equal(t, 500, env.Code, "%s: %s", body, env.Raw)
				require.Equal(t, msg, env.MsgString(), "%s", body)
			}
			id := nextLogID()
			env, err := b.client.Post(t.Context(), path, fmt.Appendf(nil, `{"jobId":1,"executorHandler":"ok","logId":%d,"logDateTime":1700000000123,"glueType":"BEAN"}`, id))
			require.NoError(t, err)
			require.Equal(t, 200, env.Code, "%s", env.Raw)
			require.Equal(t, 200, b.callback(t, id).HandleCode)
			require.Len(t, b.admin.Callbacks(), 1, "no callback for refused triggers")
		})
	}
}

func TestRunPassesTriggerFields(t *testing.T) {
	t.Parallel()
	got := make(chan xxljob.Request, 2)
	h := xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		got <- xxljob.Request{JobID: req.JobID, LogID: req.LogID, LogDateTime: req.LogDateTime, Param: req.Param,
			ShardIndex: req.ShardIndex, ShardTotal: req.ShardTotal, Handler: req.Handler}
		req.Log.Info("structured", "batch_size", 3, "who", "a b")
		return nil
	})
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"shard": h}})
	p := xxljobtest.Trigger(42, "shard", nextLogID())
	p.ExecutorParams, p.BroadcastIndex, p.BroadcastTotal, p.LogDateTime = "limit=10", 2, 3, 1700000000123
	b.run(t, p)
	r := <-got
	require.Equal(t, xxljob.Request{JobID: 42, LogID: p.LogID, LogDateTime: time.UnixMilli(1700000000123), Param: "limit=10",
		ShardIndex: 2, ShardTotal: 3, Handler: "shard"}, r)
	b.callback(t, p.LogID)
	log := b.runLog(t, p)
	require.Contains(t, log, "----------- xxl-job job execute start -----------\n")
	require.Contains(t, log, "----------- Param:limit=10\n")
	require.Contains(t, log, `[INFO] structured batch_size=3 who="a b"`)
}

func TestResults(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 60000)
	handlers := map[string]xxljob.Handler{
		"msg":   okHandler("closed 3"),
		"nomsg": okHandler(""),
		"err":   xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error { return errors.New("db down") }),
		"deadline": xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
			return fmt.Errorf("query: %w", context.DeadlineExceeded) // a deadline of its own
		}),
		"timeout": xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
			return fmt.Errorf("upstream took 40s: %w", xxljob.ErrTimeout) // Java's handleTimeout
		}),
		"long":  okHandler(long),
		"panic": xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error { panic("boom") }),
	}
	b := setup(t, opts{handlers: handlers})
	tests := []struct {
		handler string
		code    int
		msg     string // prefix
	}{
		{"msg", 200, "closed 3"},
		{"nomsg", 200, ""},
		{"err", 500, "db down"},
		{"deadline", 500, "query: context deadline exceeded"},
		{"timeout", 502, "upstream took 40s: job execute timeout"},
		{"long", 200, strings.Repeat("é", 50000) + "..."},
		{"panic", 500, "panic: boom\n\ngoroutine "},
	}
	ps := map[string]xxljobtest.TriggerParam{}
	for i, tc := range tests {
		ps[tc.handler] = xxljobtest.Trigger(i+1, tc.handler, nextLogID())
		b.run(t, ps[tc.handler])
	}
	for _, tc := range tests {
		p := ps[tc.handler]
		cb := b.callback(t, p.LogID)
		require.Equal(t, tc.code, cb.HandleCode, tc.handler)
		require.True(t, strings.HasPrefix(cb.HandleMsg, tc.msg), "%s: %.200q", tc.handler, cb.HandleMsg)
		if tc.handler == "long" {
			require.Equal(t, tc.msg, cb.HandleMsg)
		}
		if tc.handler == "nomsg" {
			require.NotContains(t, string(cb.Raw), "handleMsg")
		}
	}
	cb, _ := b.admin.Callback(ps["panic"].LogID)
	require.Contains(t, cb.HandleMsg, "runner_test.go", "stack in handleMsg")
	log := b.runLog(t, ps["panic"])
	require.Contains(t, log, "----------- JobThread Exception:panic: boom")
	require.Contains(t, log, "runner_test.go", "stack in the run log")
	require.Contains(t, log, "----------- xxl-job job execute end(error) -----------")
	require.Contains(t, b.runLog(t, ps["msg"]), "----------- Result: handleCode=200, handleMsg = closed 3\n")
}

func TestSerialExecutionOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []int64
	running := 0
	h := xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		mu.Lock()
		running++
		order = append(order, req.LogID)
		overlap := running > 1
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // give an overlap a chance to show
		mu.Lock()
		running--
		mu.Unlock()
		if overlap {
			return errors.New("overlapping runs of one job")
		}
		return nil
	})
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"serial": h}})
	var want []int64
	for range 8 {
		p := xxljobtest.Trigger(1, "serial", nextLogID())
		p.ExecutorBlockStrategy = []string{"SERIAL_EXECUTION", "", "UNKNOWN"}[len(want)%3]
		b.run(t, p)
		want = append(want, p.LogID)
	}
	for _, id := range want {
		require.Equal(t, 200, b.callback(t, id).HandleCode)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, order)
}

func TestJobsRunInParallel(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	wg.Add(2)
	h := xxljob.HandlerFunc(func(ctx context.Context, _ *xxljob.Request) error {
		wg.Done()
		wg.Wait() // returns only if both jobs run at the same time
		return nil
	})
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"h": h}})
	p1, p2 := xxljobtest.Trigger(1, "h", nextLogID()), xxljobtest.Trigger(2, "h", nextLogID())
	b.run(t, p1)
	b.run(t, p2)
	require.Equal(t, 200, b.callback(t, p1.LogID).HandleCode)
	require.Equal(t, 200, b.callback(t, p2.LogID).HandleCode)
}

func TestDiscardLater(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)

	first := xxljobtest.Trigger(1, "block", nextLogID())
	first.ExecutorBlockStrategy = "DISCARD_LATER"
	b.run(t, first) // idle: accepted
	g.waitStarted(t, first.LogID)

	later := xxljobtest.Trigger(1, "block", nextLogID())
	later.ExecutorBlockStrategy = "DISCARD_LATER"
	env, err := b.client.Run(t.Context(), later)
	require.NoError(t, err)
	require.Equal(t, `{"code":500,"msg":"block strategy effect：Discard Later"}`, string(env.Raw))

	g.open()
	require.Equal(t, 200, b.callback(t, first.LogID).HandleCode)
	_, ok := b.admin.Callback(later.LogID)
	require.False(t, ok, "no callback for a discarded trigger")
}

func TestCoverEarly(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)

	running, queued := b.holdThread(t, g)
	cover := xxljobtest.Trigger(1, "block", nextLogID())
	cover.ExecutorBlockStrategy = "COVER_EARLY"
	b.run(t, cover)
	g.waitStarted(t, cover.LogID) // on a fresh job thread

	cb := b.callback(t, running.LogID)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "block strategy effect：Cover Early [job running, killed]", cb.HandleMsg)
	cb = b.callback(t, queued.LogID)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "block strategy effect：Cover Early [job not executed, in the job queue, killed.]", cb.HandleMsg)
	require.Contains(t, b.runLog(t, running), "----------- JobThread toStop, stopReason:block strategy effect：Cover Early\n")

	g.open()
	require.Equal(t, 200, b.callback(t, cover.LogID).HandleCode)
}

func TestHandlerChangeStopsOldThread(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler(), "ok": okHandler("new")}})
	t.Cleanup(g.open)
	old := xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, old)
	g.waitStarted(t, old.LogID)
	next := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, next)
	cb := b.callback(t, old.LogID)
	require.Equal(t, "change jobhandler or glue type, and terminate the old job thread. [job running, killed]", cb.HandleMsg)
	require.Equal(t, "new", b.callback(t, next.LogID).HandleMsg)
}

func TestDuplicateLogID(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)
	running, queued := b.holdThread(t, g)

	for _, id := range []int64{running.LogID, queued.LogID} {
		dup := xxljobtest.Trigger(1, "block", id)
		dup.ExecutorBlockStrategy = "COVER_EARLY" // a repeat must not cover anything
		env, err := b.client.Run(t.Context(), dup)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf(`{"code":500,"msg":"repeate trigger job, logId:%d"}`, id), string(env.Raw))
	}
	g.open()
	require.Equal(t, 200, b.callback(t, running.LogID).HandleCode)
	require.Equal(t, 200, b.callback(t, queued.LogID).HandleCode)

	// Already run: still a repeat, on another job too.
	env, err := b.client.Run(t.Context(), xxljobtest.Trigger(2, "block", running.LogID))
	require.NoError(t, err)
	require.Equal(t, 500, env.Code)
	require.Zero(t, b.admin.Repeats(running.LogID))
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"stubborn": g.stubborn(), "ok": okHandler("")}})
	t.Cleanup(g.open)
	p := xxljobtest.Trigger(1, "stubborn", nextLogID())
	p.ExecutorTimeout = 1
	b.run(t, p)
	g.waitStarted(t, p.LogID)
	start := time.Now()
	cb := b.callback(t, p.LogID)
	require.Equal(t, 502, cb.HandleCode)
	require.Equal(t, "job execute timeout ", cb.HandleMsg)
	require.Less(t, time.Since(start), 2*time.Second, "reported without waiting for the handler")
	require.Contains(t, b.runLog(t, p), "----------- xxl-job job execute timeout")

	// The job's next trigger runs although the stubborn handler still runs.
	next := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, next)
	require.Equal(t, 200, b.callback(t, next.LogID).HandleCode)
}

func TestKill(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)

	env, err := b.client.Kill(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, `{"code":200,"msg":"job thread already killed."}`, string(env.Raw))

	running, queued := b.holdThread(t, g)

	env, err = b.client.Kill(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))
	cb := b.callback(t, running.LogID)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "scheduling center kill job. [job running, killed]", cb.HandleMsg)
	cb = b.callback(t, queued.LogID)
	require.Equal(t, 500, cb.HandleCode)
	require.Equal(t, "scheduling center kill job. [job not executed, in the job queue, killed.]", cb.HandleMsg)

	env, err = b.client.Kill(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, "job thread already killed.", env.MsgString())

	// The job can be triggered again.
	again := xxljobtest.Trigger(1, "block", nextLogID())
	b.run(t, again)
	g.waitStarted(t, again.LogID)
	g.open()
	require.Equal(t, 200, b.callback(t, again.LogID).HandleCode)
	require.Zero(t, b.admin.Repeats(running.LogID), "exactly one callback per trigger")
}

// A kill reports every queued trigger before it answers, durably, with
// one fsync for the lot: one each made a kill of a long queue outlast the
// admin's 3 s timeout on a disk with slow fsyncs.
func TestKillOfALongQueueSyncsOnce(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"block": g.handler()}})
	t.Cleanup(g.open)
	running, first := b.holdThread(t, g)
	queued := []int64{first.LogID}
	for range 299 {
		p := xxljobtest.Trigger(1, "block", nextLogID())
		b.run(t, p)
		queued = append(queued, p.LogID)
	}
	before := xxljob.SpoolFsyncs(b.exec)
	env, err := b.client.Kill(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))
	// The batch's fsync, and perhaps the killed running trigger's own.
	require.LessOrEqual(t, xxljob.SpoolFsyncs(b.exec)-before, uint64(2), "fsyncs while killing %d queued triggers", len(queued))
	for _, id := range queued {
		cb := b.callback(t, id)
		require.Equal(t, "scheduling center kill job. [job not executed, in the job queue, killed.]", cb.HandleMsg, "log %d", id)
		require.Zero(t, b.admin.Repeats(id), "log %d called back twice", id)
	}
	require.Equal(t, "scheduling center kill job. [job running, killed]", b.callback(t, running.LogID).HandleMsg)
}

func TestIdleJobThreadExits(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{
		handlers: map[string]xxljob.Handler{"ok": okHandler("")},
		before:   func(e *xxljob.Executor) { xxljob.SetIdleTimeout(e, 20*time.Millisecond) },
	})
	p := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, p)
	b.callback(t, p.LogID)
	waitFor(t, func() bool { return xxljob.ThreadCount(b.exec) == 0 }, "idle job thread exits")
	env, err := b.client.Kill(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, "job thread already killed.", env.MsgString())

	next := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, next)
	require.Equal(t, 200, b.callback(t, next.LogID).HandleCode)
}
