package xxljob

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A start record left by a process that ended is resolved at the next open
// by what else the spool holds for its run, at every point of the run's
// sequence: start synced -> result written -> start acknowledged.
func TestSpoolStartRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		result   bool // the run's result was written
		ackStart bool // its start acknowledged
		interr   bool // a restart wrote the interrupted failure instead
		other    bool // the result is another run's of the same logId (an admin whose ids started again)
		want     byte // what the spool holds for the run
		open     bool // still unfinished after the reopen
	}{
		{name: "killed during the run", open: true, want: resultNone},
		{name: "killed between result and acknowledgement", result: true, open: true, want: resultWritten},
		{name: "finished", result: true, ackStart: true},
		{name: "killed during the run, the logId's earlier run waits", result: true, other: true, open: true, want: resultNone},
		{name: "restart wrote the failure, killed before the hand-over", interr: true, open: true, want: resultInterrupted},
		{name: "restart wrote the failure and handed it over", interr: true, ackStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := mustOpenSpool(t, dir)
			p := triggerParam{JobID: 7, LogID: 42, LogDateTime: 1700000000000, ExecutorParams: "dryRun=true",
				BroadcastIndex: 1, BroadcastTotal: 3}
			at := time.UnixMilli(1700000000123)
			start, err := s.appendStart(p, "h", at)
			if err != nil {
				t.Fatal(err)
			}
			res := callbackParam{LogID: 42, LogDateTim: p.LogDateTime, HandleCode: 200}
			if tc.other {
				res.LogDateTim -= 86400000
			}
			switch {
			case tc.result:
				_, err = s.append(res, true)
			case tc.interr:
				res.HandleCode = CodeFail
				_, err = s.write(spoolRecord{callbackParam: res, Interrupted: true}, recDisk)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.ackStart {
				if err := s.ack([]spoolRef{start}); err != nil {
					t.Fatal(err)
				}
			}
			s.close() // the files as a killed process leaves them

			s = mustOpenSpool(t, dir)
			defer s.close()
			if !tc.open {
				if len(s.starts) != 0 {
					t.Fatalf("unfinished runs: %+v, want none", s.starts)
				}
				return
			}
			if len(s.starts) != 1 {
				t.Fatalf("unfinished runs: %+v, want one", s.starts)
			}
			u := s.starts[0]
			if u.result != tc.want || u.logID != 42 || u.logDateTim != p.LogDateTime {
				t.Fatalf("unfinished run %+v, want logId 42 result %d", u, tc.want)
			}
			want := runStart{At: at.UnixMilli(), Handler: "h", JobID: 7, Param: "dryRun=true", ShardIndex: 1, ShardTotal: 3}
			if u.start != want {
				t.Fatalf("start %+v, want %+v", u.start, want)
			}
			// A start record is never a result to deliver.
			for _, id := range diskIDs(t, s) {
				if id == 42 && !tc.result && !tc.interr && !tc.other {
					t.Fatalf("the start record was read back as a result")
				}
			}
		})
	}
}

// A start record keeps at most maxStartParam bytes of the job param, cut
// before a character.
func TestSpoolStartParamBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, param, want string
	}{
		{name: "short", param: "dryRun=true", want: "dryRun=true"},
		{name: "at the bound", param: strings.Repeat("a", maxStartParam), want: strings.Repeat("a", maxStartParam)},
		{name: "long", param: strings.Repeat("a", 5<<20), want: strings.Repeat("a", maxStartParam)},
		{name: "cut inside a character", param: strings.Repeat("a", maxStartParam-1) + "é" + "b", want: strings.Repeat("a", maxStartParam-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := mustOpenSpool(t, dir)
			if _, err := s.appendStart(triggerParam{JobID: 1, LogID: 9, LogDateTime: 1, ExecutorParams: tc.param}, "h", time.Now()); err != nil {
				t.Fatal(err)
			}
			s.close()
			s = mustOpenSpool(t, dir)
			defer s.close()
			if len(s.starts) != 1 {
				t.Fatalf("got %d unfinished runs, want one", len(s.starts))
			}
			if got := s.starts[0].start.Param; got != tc.want {
				t.Fatalf("param of %d bytes, want %d bytes", len(got), len(tc.want))
			}
		})
	}
}

// A run whose start record's segment was closed by a switch with a failed
// fsync is not run, as when the start cannot be written at all: it fails
// at once with msgStartNotRecorded, and that failure is made durable in
// the next segment and queued for the admin.
func TestRunNotStartedWhenStartNotDurable(t *testing.T) {
	t.Parallel()
	e, s, d := faultyExecutor(t, Config{})
	fillSegment(t, s, 1)
	var called atomic.Bool
	th := &jobThread{jobID: 7, name: "h", handler: HandlerFunc(func(context.Context, *Request) error {
		called.Store(true)
		return nil
	})}
	p := triggerParam{JobID: 7, LogID: 42, LogDateTime: 1700000000000}

	resume := pauseSyncs(s)
	ran := make(chan struct{})
	go func() { // its start record is the segment's last, its fsync not yet made
		e.runTrigger(t.Context(), th, p)
		close(ran)
	}()
	waitWritten(t, s, segmentRecords)
	d.file(t, 0).failSyncs.Store(1 << 30) // the segment's disk fails from now on
	other := make(chan error, 1)
	go func() { // switches to a new segment, whose fsync succeeds
		_, err := s.append(callbackParam{LogID: 2, LogDateTim: 5, HandleCode: 200}, true)
		other <- err
	}()
	waitWritten(t, s, segmentRecords+1)
	resume()
	<-ran
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if called.Load() {
		t.Error("handler called though its start record is not durable")
	}
	e.callback.mu.Lock()
	queue := e.callback.queue
	e.callback.mu.Unlock()
	if len(queue) != 1 {
		t.Fatalf("queued %d results, want the run's failure", len(queue))
	}
	got := queue[0]
	if got.p.LogID != 42 || got.p.HandleCode != CodeFail || !strings.HasPrefix(got.p.HandleMsg, msgStartNotRecorded) {
		t.Errorf("queued %+v, want the run's failure %q...", got.p, msgStartNotRecorded)
	}
	if got.ref.seg == nil || got.ref.seg.first == 1 {
		t.Errorf("the failure not written to the new segment: ref %+v", got.ref)
	}
	if !strings.Contains(got.p.HandleMsg, errDiskSync.Error()) {
		t.Errorf("failure message %q does not say why", got.p.HandleMsg)
	}
}

// A run not started because its start record's fsync failed never ran: a
// restart must not report it as interrupted, even when its failure result
// could not be written either (kept in memory only, lost with the process).
func TestRunNotStartedNotReportedInterrupted(t *testing.T) {
	t.Parallel()
	e, s, d := faultyExecutor(t, Config{})
	ref, err := s.append(callbackParam{LogID: 1, LogDateTim: 5, HandleCode: 200}, true) // opens the segment
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ack([]spoolRef{ref}); err != nil {
		t.Fatal(err)
	}
	d.file(t, 0).failSyncs.Store(1 << 30) // the start record's fsync fails
	d.mu.Lock()
	d.createErr = errors.New("no space left on device (a test's failing disk)") // and the failure's new segment
	d.mu.Unlock()
	var called atomic.Bool
	th := &jobThread{jobID: 7, name: "h", handler: HandlerFunc(func(context.Context, *Request) error {
		called.Store(true)
		return nil
	})}
	e.runTrigger(t.Context(), th, triggerParam{JobID: 7, LogID: 42, LogDateTime: 1700000000000})
	if called.Load() {
		t.Fatal("handler called though its start record is not durable")
	}
	e.callback.mu.Lock()
	queue := e.callback.queue
	e.callback.mu.Unlock()
	if len(queue) != 1 || queue[0].ref.seg != nil {
		t.Fatalf("queued %+v, want the run's failure in memory only", queue)
	}

	// The process ends here (its memory queue with it); the next one opens
	// the spool's files as they are.
	restarted := mustOpenSpool(t, s.dir)
	defer restarted.close()
	runs, _ := e.recoverRuns(t.Context(), restarted)
	for _, r := range runs {
		if r.LogID == 42 {
			t.Errorf("a restart reports the run as interrupted though it never ran: %+v", r)
		}
	}
	if ids := diskIDs(t, restarted); len(ids) != 0 {
		t.Errorf("a restart delivers %v, want nothing (no result was written)", ids)
	}
}
