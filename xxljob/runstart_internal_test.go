package xxljob

import (
	"strings"
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
