package xxljob

import (
	"context"
	"log/slog"
	"time"
	"unicode/utf8"
)

// A run killed part-way (kill -9, a crash, a power cut) would never report:
// its result is written only when it ends. So each run triggered by the
// admin first writes a start record to the callback spool and syncs it,
// before its handler is called:
//
//	start record synced -> handler -> result written and synced -> start acknowledged
//
// At the next start on the same LogPath, a start record not acknowledged is
// resolved by what else the spool holds for that logId:
//
//   - its result: the run ended and its result is (or was) delivered; the
//     start is acknowledged, nothing more is sent;
//   - nothing: the process ended during the run. A failure result
//     (msgInterrupted, marked interrupted) is written, to be delivered like
//     any other; then a second start record marked reported, which stays
//     until Config.InterruptedFunc accepted the run; then the first start
//     is acknowledged;
//   - the interrupted failure only: the process ended again in between;
//     the steps go on from the second record.
//
// The second record is needed because a delivered result's segment may be
// removed: once the failure is written, the record that the run is still
// owed to InterruptedFunc must not depend on it.
//
// The start is acknowledged only after the result is durable, and before
// the result can be delivered and its segment removed, so no run is
// reported both ways. RunOnce writes no start record: it has no admin.

// InterruptedRun is a run that an earlier process on the same LogPath
// started and never finished: it was killed, crashed or lost power
// part-way. The admin is sent a failure for it (CodeFail, Msg) once, through
// the callback spool.
type InterruptedRun struct {
	Handler     string
	JobID       int
	LogID       int64
	LogDateTime time.Time // the trigger time, as in Request
	Param       string    // the first maxStartParam bytes (whole UTF-8 characters)
	ShardIndex  int
	ShardTotal  int
	// StartedAt is when the handler was about to be called, by the clock
	// of the process that ran it.
	StartedAt time.Time
	// Msg is the handleMsg reported to the admin.
	Msg string
}

// runStart is the start record's own part.
type runStart struct {
	At         int64  `json:"at"` // epoch milliseconds
	Handler    string `json:"handler"`
	JobID      int32  `json:"jobId"`
	Param      string `json:"param,omitempty"`
	ShardIndex int32  `json:"shardIndex,omitempty"`
	ShardTotal int32  `json:"shardTotal,omitempty"`
	// Reported marks the record a restart wrote once the run's failure was
	// in the spool: only the hand-over to InterruptedFunc is owed.
	Reported bool `json:"reported,omitempty"`
}

// What openSpool found for a logId.
const (
	resultNone        byte = iota
	resultInterrupted      // the failure a restart wrote
	resultWritten          // the run's own result
)

func resultOf(r spoolRecord) byte {
	if r.Interrupted {
		return resultInterrupted
	}
	return resultWritten
}

// runID names a run in the spool: its logId and trigger time (an admin
// whose ids started again reuses logIds, never with the same time).
type runID struct {
	logID      int64
	logDateTim int64
}

// unfinishedRun is a start record openSpool found not acknowledged.
type unfinishedRun struct {
	ref        spoolRef
	logID      int64
	logDateTim int64
	start      runStart
	result     byte
}

// resolveStarts keeps, of the start records read, those not acknowledged,
// with what result the spool holds for each.
func (s *spool) resolveStarts() {
	var open []unfinishedRun
	for _, u := range s.starts {
		if u.ref.seg.state[u.ref.seq-u.ref.seg.first] != recRunning {
			continue
		}
		u.result = s.results[runID{u.logID, u.logDateTim}]
		open = append(open, u)
	}
	s.starts, s.results = open, nil
}

// maxStartParam bounds the job param kept in a start record: the admin
// stores at most 512 characters, but a /run body may carry 5 MiB, and every
// start record is synced.
const maxStartParam = 4096

// appendStart writes a run's start record, durably.
func (s *spool) appendStart(p triggerParam, handler string, at time.Time) (spoolRef, error) {
	param := p.ExecutorParams
	if len(param) > maxStartParam {
		n := maxStartParam
		for n > 0 && !utf8.RuneStart(param[n]) { // cut before a character, not inside one
			n--
		}
		param = param[:n]
	}
	return s.write(spoolRecord{
		callbackParam: callbackParam{LogID: p.LogID, LogDateTim: p.LogDateTime},
		Start: &runStart{At: at.UnixMilli(), Handler: handler, JobID: p.JobID, Param: param,
			ShardIndex: p.BroadcastIndex, ShardTotal: p.BroadcastTotal},
	}, recRunning)
}

// msgInterrupted is the handleMsg of a run an earlier process started and
// never finished.
func msgInterrupted(started time.Time) string {
	return "executor restarted during the run: it started at " + started.Format("2006-01-02 15:04:05.000 -0700") +
		" and the process ended (killed, crashed or powered off) before it reported a result"
}

// recoverRuns resolves the start records openSpool found (see above) and
// returns the interrupted runs to hand to InterruptedFunc, with the
// reported start records to acknowledge once it accepted them.
func (e *Executor) recoverRuns(ctx context.Context, sp *spool) (runs []InterruptedRun, reported []spoolRef) {
	owed := map[runID]bool{}
	for _, u := range sp.starts {
		if u.start.Reported {
			owed[runID{u.logID, u.logDateTim}] = true
			runs, reported = append(runs, interruptedRun(u)), append(reported, u.ref)
		}
	}
	for _, u := range sp.starts {
		if u.start.Reported {
			continue
		}
		if owed[runID{u.logID, u.logDateTim}] || u.result == resultWritten {
			e.ackStart(ctx, sp, u)
			continue
		}
		run := interruptedRun(u)
		if u.result == resultNone {
			p := callbackParam{LogID: u.logID, LogDateTim: u.logDateTim, HandleCode: CodeFail, HandleMsg: run.Msg}
			if _, err := sp.write(spoolRecord{callbackParam: p, Interrupted: true}, recDisk); err != nil {
				e.log.ErrorContext(ctx, "callback spool: an interrupted run's failure not written; retried at the next start",
					"log_id", u.logID, "error", err)
				continue
			}
			if rl, err := e.logs.open(u.logID, u.logDateTim, e.logWriteError(u.logID)); err == nil {
				now := time.Now()
				rl.entry(now, slog.LevelError, run.Msg)
				rl.entry(now, slog.LevelInfo, lineResult(CodeFail, run.Msg))
			}
			e.log.WarnContext(ctx, "run interrupted by the end of the previous process; reported as failed",
				"handler", run.Handler, "job_id", run.JobID, "log_id", run.LogID, "started_at", run.StartedAt)
		}
		st := u.start
		st.Reported = true
		ref, err := sp.write(spoolRecord{callbackParam: callbackParam{LogID: u.logID, LogDateTim: u.logDateTim}, Start: &st}, recRunning)
		if err != nil {
			e.log.ErrorContext(ctx, "callback spool: an interrupted run not recorded for InterruptedFunc; retried at the next start",
				"log_id", u.logID, "error", err)
			continue
		}
		e.ackStart(ctx, sp, u)
		runs, reported = append(runs, run), append(reported, ref)
	}
	sp.starts = nil
	return runs, reported
}

func (e *Executor) ackStart(ctx context.Context, sp *spool, u unfinishedRun) {
	if err := sp.ack([]spoolRef{u.ref}); err != nil {
		e.log.WarnContext(ctx, "callback spool: mark a run's start resolved", "log_id", u.logID, "error", err)
	}
}

func interruptedRun(u unfinishedRun) InterruptedRun {
	started := time.UnixMilli(u.start.At)
	return InterruptedRun{Handler: u.start.Handler, JobID: int(u.start.JobID), LogID: u.logID,
		LogDateTime: logTime(u.logDateTim), Param: u.start.Param, ShardIndex: int(u.start.ShardIndex),
		ShardTotal: int(u.start.ShardTotal), StartedAt: started, Msg: msgInterrupted(started)}
}

// handOver gives the interrupted runs to InterruptedFunc (if set) and
// acknowledges the start record of each it accepted; one it refused is
// handed over again at the next start.
func (e *Executor) handOver(ctx context.Context, runs []InterruptedRun, starts []spoolRef) {
	sp := e.callback.spool
	for i, run := range runs {
		if f := e.cfg.InterruptedFunc; f != nil {
			if err := f(ctx, run); err != nil {
				e.log.ErrorContext(ctx, "interrupted run not accepted by InterruptedFunc; handed over again at the next start",
					"handler", run.Handler, "log_id", run.LogID, "error", err)
				continue
			}
		}
		if err := sp.ack([]spoolRef{starts[i]}); err != nil {
			e.log.WarnContext(ctx, "callback spool: mark an interrupted run's start", "log_id", run.LogID, "error", err)
		}
	}
}
