package xxljob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"
	"unicode/utf8"
)

// ErrTimeout reports a run as timed out (CodeTimeout, 502), as Java's
// XxlJobHelper.handleTimeout does. A handler returns it, or an error wrapping
// it, to say the run took too long by its own measure; the message sent to
// the admin is the error's text. It is also the cancellation cause of a
// run's context when the job's executorTimeout expires, so a handler that
// returns context.Cause(ctx) then reports the timeout too. Any other error,
// a deadline of the handler's own (context.DeadlineExceeded from a query or
// an HTTP call) included, is a failure (CodeFail, 500).
var ErrTimeout = errors.New("job execute timeout")

// runTrigger is the runner's execFunc: it builds the Request of a dequeued
// trigger and executes it under the job's executorTimeout.
func (e *Executor) runTrigger(ctx context.Context, t *jobThread, p triggerParam) {
	rl, err := e.logs.open(p.LogID, p.LogDateTime, e.logWriteError(p.LogID))
	if err != nil { // unreachable: decodeTrigger validated both numbers
		e.log.Error("run log path", "log_id", p.LogID, "error", err)
	}
	req := newRequest(rl)
	req.JobID, req.LogID, req.LogDateTime = int(p.JobID), p.LogID, logTime(p.LogDateTime)
	req.Param, req.Handler = p.ExecutorParams, t.name
	req.ShardIndex, req.ShardTotal = int(p.BroadcastIndex), int(p.BroadcastTotal)
	timeout := time.Duration(p.ExecutorTimeout) * time.Second
	// The start is on disk before the handler can do anything, so a
	// process that ends during the run still reports it (runstart.go).
	start, err := e.callback.spool.appendStart(p, t.name, time.Now())
	if err != nil {
		if start.seg != nil {
			// Written, but its fsync failed. The run never runs, so the
			// record must not make a restart report it as interrupted
			// (and call InterruptedFunc), which it would whenever the
			// failure below cannot be written either: mark it finished.
			if aerr := e.callback.spool.ack([]spoolRef{start}); aerr != nil {
				e.log.Warn("mark a run not started finished in the callback spool; a restart may report it as interrupted",
					"log_id", p.LogID, "error", aerr)
			}
		}
		msg := msgStartNotRecorded + err.Error()
		rl.entry(time.Now(), slog.LevelError, msg)
		e.log.Error("run not started: its start could not be written to the callback spool", "log_id", p.LogID, "error", err)
		e.callback.push(callbackParam{LogID: p.LogID, LogDateTim: p.LogDateTime, HandleCode: CodeFail, HandleMsg: truncateMsg(msg)})
		return
	}
	var queue func()
	e.execute(ctx, t.handler, req, timeout, func(res Result) {
		queue = e.callback.persist(callbackParam{LogID: p.LogID, LogDateTim: p.LogDateTime, HandleCode: res.Code, HandleMsg: res.Msg}, start)
	})
	queue() // the log's last lines are written: now the admin may have the result
}

// msgStartNotRecorded begins the failure of a run whose start could not be
// made durable: it is not run, since a crash during it would go unreported.
const msgStartNotRecorded = "run not started: its start could not be written to the callback spool " +
	"(a crash during the run would go unreported): "

func newRequest(rl *runLog) *Request {
	return &Request{run: &runState{rl: rl}, Log: slog.New(&runLogHandler{rl: rl})}
}

func (e *Executor) logWriteError(logID int64) func(error) {
	return func(err error) {
		e.log.Warn("write run log", "log_id", logID, "error", err)
	}
}

type outcome struct {
	err   error
	panic string // value and stack of a recovered panic
}

// execute runs one handler call and maps its outcome to a Result. It returns
// when the handler returns or, if ctx ends first (kill, cover, timeout,
// shutdown), at once: such a handler keeps running in the background,
// tracked so Shutdown can wait for it. report (if not nil) gets the result
// before the run log's end lines are written: once the log says the run is
// over, its result is in the callback spool (runTrigger sends it after).
func (e *Executor) execute(ctx context.Context, h Handler, req *Request, timeout time.Duration, report func(Result)) Result {
	rl := req.run.rl
	start := time.Now()
	rl.entry(start, slog.LevelInfo, lineExecStart)
	rl.entry(start, slog.LevelInfo, lineParamPrefix+clip(req.Param, maxLogParam))
	e.obs.RunStarted(req.Handler, req.JobID, req.LogID)

	if timeout > 0 { // counted from dequeue, as in Java
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		defer cancel()
	}
	done := make(chan outcome, 1)
	hctx := withRun(ctx, req) // not ctx: the lines below carry job_id and log_id already
	e.handlers.goFunc(func() { done <- callHandler(hctx, h, req) })
	var o outcome
	returned := false
	select {
	case o = <-done:
		returned = true
	case <-ctx.Done():
	}

	var res Result
	var se *stopError
	handlerFailed := false
	cause := context.Cause(ctx)
	succeeded := returned && o.err == nil && o.panic == ""
	switch {
	case succeeded: // even if a deadline passed as it returned
		res = Result{Code: CodeSuccess, Msg: req.resultMsg()}
	case ctx.Err() != nil && errors.As(cause, &se):
		res = Result{Code: CodeFail, Msg: se.reason + suffixRunningKilled}
		rl.entry(time.Now(), slog.LevelWarn, lineToStopPfx+se.reason)
	case ctx.Err() != nil && (errors.Is(cause, ErrTimeout) || errors.Is(cause, context.DeadlineExceeded)):
		// The run's own deadline: the job's executorTimeout (or RunOnce's
		// caller's). Deadlines the handler set itself are not this context's.
		res = Result{Code: CodeTimeout, Msg: msgTimeout}
		line := lineTimeout
		if timeout > 0 {
			line += " after " + timeout.String()
		}
		rl.entry(time.Now(), slog.LevelWarn, line)
	case !returned: // the parent context ended: RunOnce's caller or the executor itself
		res = Result{Code: CodeFail, Msg: "job cancelled: " + cause.Error()}
	case o.panic != "":
		res, handlerFailed = Result{Code: CodeFail, Msg: o.panic}, true
	case errors.Is(o.err, ErrTimeout): // the handler says it timed out
		res, handlerFailed = Result{Code: CodeTimeout, Msg: o.err.Error()}, true
	default:
		res, handlerFailed = Result{Code: CodeFail, Msg: o.err.Error()}, true
	}
	res.Msg = truncateMsg(res.Msg)
	d := time.Since(start)
	e.obs.RunFinished(req.Handler, req.JobID, req.LogID, res.Code, d)
	if report != nil {
		report(res)
	}

	now := time.Now()
	if handlerFailed {
		rl.entry(now, slog.LevelError, lineExceptionPfx+res.Msg)
		rl.entry(now, slog.LevelError, lineExecEndError)
	} else {
		rl.entry(now, slog.LevelInfo, lineExecEnd)
	}
	rl.entry(now, slog.LevelInfo, lineResult(res.Code, res.Msg))

	level := slog.LevelInfo
	if res.Code != CodeSuccess {
		level = slog.LevelWarn
	}
	e.log.Log(ctx, level, "job run finished", "handler", clip(req.Handler, maxLogField), "job_id", req.JobID,
		"log_id", req.LogID, "code", res.Code, "duration", d)
	return res
}

func callHandler(ctx context.Context, h Handler, req *Request) (o outcome) {
	defer func() {
		if v := recover(); v != nil {
			o = outcome{panic: fmt.Sprintf("panic: %v\n\n%s", v, debug.Stack())}
		}
	}()
	return outcome{err: h.Handle(ctx, req)}
}

// truncateMsg cuts handleMsg at maxHandleMsg characters plus "...", as Java
// does (the admin stores at most 15000 anyway).
func truncateMsg(s string) string {
	if len(s) <= maxHandleMsg || utf8.RuneCountInString(s) <= maxHandleMsg {
		return s
	}
	n := 0
	for i := range s {
		if n == maxHandleMsg {
			return s[:i] + "..."
		}
		n++
	}
	return s
}

// RunOnce runs the named handler once and returns its result, through the
// same execution and run-log code as a trigger from the admin.
// The run log is written to its file under LogPath and, as it is written, to
// logOut (if not nil). No admin is involved and no callback is sent; Start is
// not needed. The run uses a synthetic log id (epoch milliseconds, unique in
// this process) and job id 0. Cancelling ctx ends the run (CodeFail, or
// CodeTimeout when its deadline passes). The error reports only what
// prevented the run,
// such as an unknown handler; a failed run is a Result with CodeFail.
func (e *Executor) RunOnce(ctx context.Context, handler, param string, shardIndex, shardTotal int, logOut io.Writer) (Result, error) {
	h, ok := e.runner.handler(handler)
	if !ok {
		return Result{}, errors.New("xxljob: " + msgHandlerNotFound(handler))
	}
	shardTotal = max(shardTotal, 1)
	if shardIndex < 0 || shardIndex >= shardTotal {
		return Result{}, fmt.Errorf("xxljob: shard index %d out of range [0,%d)", shardIndex, shardTotal)
	}
	now := time.Now()
	logID := e.nextRunOnceID(now)
	rl, err := e.logs.open(logID, now.UnixMilli(), e.logWriteError(logID))
	if err != nil {
		return Result{}, fmt.Errorf("xxljob: run log: %w", err)
	}
	rl.tee = logOut
	req := newRequest(rl)
	req.LogID, req.LogDateTime, req.Param, req.Handler = logID, time.UnixMilli(now.UnixMilli()), param, handler
	req.ShardIndex, req.ShardTotal = shardIndex, shardTotal
	return e.execute(ctx, h, req, 0, nil), nil
}

func (e *Executor) nextRunOnceID(now time.Time) int64 {
	e.runOnceMu.Lock()
	defer e.runOnceMu.Unlock()
	e.runOnceLast = max(e.runOnceLast+1, now.UnixMilli())
	return e.runOnceLast
}
