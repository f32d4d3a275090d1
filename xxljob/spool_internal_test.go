package xxljob

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustOpenSpool(t testing.TB, dir string) *spool {
	t.Helper()
	s, _, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func diskIDs(t *testing.T, s *spool) []int64 {
	t.Helper()
	var ids []int64
	if err := s.diskBatches(7, func(b []spoolItem) bool {
		for _, it := range b {
			ids = append(ids, it.p.LogID)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, segmentPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// Results survive a restart until acknowledged; acknowledged ones do not
// come back; segments with nothing left are removed.
func TestSpoolRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpenSpool(t, dir)
	var refs []spoolRef
	for i := range 10 {
		r, err := s.append(callbackParam{LogID: int64(i + 1), LogDateTim: 5, HandleCode: 200}, i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	if got := s.pending(); got != 5 {
		t.Fatalf("pending %d, want the 5 not queued in memory", got)
	}
	if err := s.ack(refs[:4]); err != nil {
		t.Fatal(err)
	}
	s.release(refs[4:6]) // a failed first attempt
	// No close: a crash. A torn last line and a leftover temp file too.
	f, err := os.OpenFile(filepath.Join(dir, segmentName(1)+segmentSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"seq":11,"logId":99,"logDa`)
	_ = f.Close()
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	s2, torn, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if torn != 1 {
		t.Fatalf("torn %d, want 1", torn)
	}
	if _, err := os.Stat(filepath.Join(dir, tempPrefix+"123")); !os.IsNotExist(err) {
		t.Fatal("leftover temporary file not removed at start")
	}
	if got, want := diskIDs(t, s2), []int64{5, 6, 7, 8, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("after restart %v, want %v", got, want)
	}
	var all []spoolRef
	_ = s2.diskBatches(100, func(b []spoolItem) bool {
		for _, it := range b {
			all = append(all, it.ref)
		}
		return true
	})
	if err := s2.ack(all); err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, dir); len(files) != 0 {
		t.Fatalf("delivered segment not removed: %v", files)
	}
	if s2.pending() != 0 {
		t.Fatal("pending after all delivered")
	}
	// New results after the restart go to a new segment.
	if _, err := s2.append(callbackParam{LogID: 100, LogDateTim: 5, HandleCode: 500}, false); err != nil {
		t.Fatal(err)
	}
	s2.close()
	if got := diskIDs(t, mustOpenSpool(t, dir)); !slices.Equal(got, []int64{100}) {
		t.Fatalf("got %v", got)
	}
}

// A full segment is sealed and removed once delivered, while the active one
// goes on.
func TestSpoolSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpenSpool(t, dir)
	defer s.close()
	var refs []spoolRef
	for i := range segmentRecords + 3 {
		r, err := s.append(callbackParam{LogID: int64(i + 1), HandleCode: 200}, false)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	if files := segmentFiles(t, dir); len(files) != 2 {
		t.Fatalf("segments %v, want 2", files)
	}
	if err := s.ack(refs[:segmentRecords]); err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, dir); !slices.Equal(files, []string{segmentName(segmentRecords+1) + segmentSuffix}) {
		t.Fatalf("after delivering the first segment: %v", files)
	}
	if s.pending() != 3 {
		t.Fatalf("pending %d", s.pending())
	}
}

// appendAll makes several results durable with one fsync, where append
// makes one each, and every result survives a crash right after it.
func TestSpoolAppendAllOneFsync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := mustOpenSpool(t, dir)
	var ps []callbackParam
	for i := range 300 {
		ps = append(ps, callbackParam{LogID: int64(i + 1), LogDateTim: 5, HandleCode: 500, HandleMsg: "killed"})
	}
	if _, err := s.append(ps[0], true); err != nil { // the segment is open: its creation syncs nothing more below
		t.Fatal(err)
	}
	before := s.syncs.Load()
	refs, errs := s.appendAll(ps[1:])
	if got := s.syncs.Load() - before; got != 1 {
		t.Fatalf("appendAll of %d results made %d fsyncs, want 1", len(ps)-1, got)
	}
	for i, err := range errs {
		if err != nil || refs[i].seg == nil {
			t.Fatalf("result %d: ref %+v, error %v", i, refs[i], err)
		}
	}
	// No close: a crash. Results queued in memory come back from disk.
	s2 := mustOpenSpool(t, dir)
	var want []int64
	for _, p := range ps {
		want = append(want, p.LogID)
	}
	if got := diskIDs(t, s2); !slices.Equal(got, want) {
		t.Fatalf("after restart %d results, want %d", len(got), len(want))
	}
}

// BenchmarkSpoolAppendAck is the cost of one result through the spool
// (durable append, then acknowledgement) with n results already waiting on
// disk: it does not grow with n, since nothing lists or rereads the folder.
// The fsync dominates; "fsync-only" (a plain append and fsync of a line of
// the same size) is the floor on the same disk.
func BenchmarkSpoolAppendAck(b *testing.B) {
	b.Run("fsync-only", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		line := []byte(strings.Repeat("x", 140) + "\n")
		for b.Loop() {
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, waiting := range []int{0, 10000, 100000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			dir := b.TempDir()
			s := mustOpenSpool(b, dir)
			defer s.close()
			for i := range waiting {
				if _, err := s.append(callbackParam{LogID: int64(i + 1), LogDateTim: 1700000000123, HandleCode: 500, HandleMsg: "admin down"}, false); err != nil {
					b.Fatal(err)
				}
			}
			p := callbackParam{LogID: 1 << 40, LogDateTim: 1700000000123, HandleCode: 200, HandleMsg: strings.Repeat("m", 40)}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r, err := s.append(p, true)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.ack([]spoolRef{r}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// faultyDisk stands in front of the spool's segment files and fails what a
// failing disk fails: an fsync that returns an error has not made the data
// durable (Linux may even drop the dirty pages, so a later fsync's success
// proves nothing for them), and creating a new segment may fail too.
type faultyDisk struct {
	mu        sync.Mutex
	files     []*faultyFile // in the order the spool created them
	createErr error         // set: creating a segment fails with it
	failNew   int64         // each file created from now on fails its first failNew fsyncs
}

type faultyFile struct {
	segmentFile
	failSyncs atomic.Int64 // the next n fsyncs fail without syncing

	mu      sync.Mutex
	stalled chan struct{} // set: the next fsync closes it, waits for resume and fails
	resume  chan struct{}
}

var errDiskSync = errors.New("input/output error (a test's failing disk)")

func (f *faultyFile) Sync() error {
	f.mu.Lock()
	stalled, resume := f.stalled, f.resume
	f.stalled = nil
	f.mu.Unlock()
	if stalled != nil {
		close(stalled)
		<-resume
		return errDiskSync
	}
	if f.failSyncs.Add(-1) >= 0 {
		return errDiskSync
	}
	f.failSyncs.Store(0)
	return f.segmentFile.Sync()
}

// stallSync makes the next fsync wait until resume is called, then fail;
// the returned channel closes once that fsync began.
func (f *faultyFile) stallSync() (began <-chan struct{}, resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalled, f.resume = make(chan struct{}), make(chan struct{})
	r := f.resume
	return f.stalled, func() { close(r) }
}

// faultySpool opens a spool in dir whose segment files are a faultyDisk's.
func faultySpool(t *testing.T, dir string) (*spool, *faultyDisk) {
	t.Helper()
	s := mustOpenSpool(t, dir)
	d := &faultyDisk{}
	s.create = func(name string) (segmentFile, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.createErr != nil {
			return nil, d.createErr
		}
		f, err := createSegment(name)
		if err != nil {
			return nil, err
		}
		ff := &faultyFile{segmentFile: f}
		ff.failSyncs.Store(d.failNew)
		d.files = append(d.files, ff)
		return ff, nil
	}
	return s, d
}

// failNewFiles makes every file created from now on fail its first n
// fsyncs (0: none).
func (d *faultyDisk) failNewFiles(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNew = n
}

// faultyExecutor returns an executor (not started) whose callback spool's
// files are a faultyDisk's; cfg's LogPath is a new temporary folder and
// its admin, unless cfg names one, an address nothing answers.
func faultyExecutor(t *testing.T, cfg Config) (*Executor, *spool, *faultyDisk) {
	t.Helper()
	cfg.OpenWithoutToken, cfg.AppName, cfg.LogPath = true, "t", t.TempDir()
	if cfg.AdminAddresses == nil {
		cfg.AdminAddresses = []string{"http://127.0.0.1:1/a"}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, d := faultySpool(t, filepath.Join(cfg.LogPath, spoolDirName))
	t.Cleanup(s.close)
	e.callback.spool = s
	return e, s, d
}

func (d *faultyDisk) file(t *testing.T, i int) *faultyFile {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if i >= len(d.files) {
		t.Fatalf("segment file %d not created; %d are", i, len(d.files))
	}
	return d.files[i]
}

// fillSegment appends results (durably, one fsync) until the active segment
// has room for n more.
func fillSegment(t *testing.T, s *spool, n int) {
	t.Helper()
	s.mu.Lock()
	used := 0
	if k := len(s.segs); k > 0 && s.active != nil {
		used = len(s.segs[k-1].state)
	}
	s.mu.Unlock()
	ps := make([]callbackParam, segmentRecords-n-used)
	for i := range ps {
		ps[i] = callbackParam{LogID: int64(1_000_000 + i), LogDateTim: 5, HandleCode: 200}
	}
	_, errs := s.appendAll(ps)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// A kill's results that straddle a segment switch whose fsync of the old
// segment fails: those left in the old segment are not durable, whatever
// the new segment's fsync says.
func TestSpoolAppendAllFailedSwitchSync(t *testing.T) {
	t.Parallel()
	s, d := faultySpool(t, t.TempDir())
	defer s.close()
	fillSegment(t, s, 1)
	d.file(t, 0).failSyncs.Store(1 << 30) // the old segment's disk fails from now on
	ps := []callbackParam{{LogID: 1, LogDateTim: 5, HandleCode: 500}, {LogID: 2, LogDateTim: 5, HandleCode: 500}}
	refs, errs := s.appendAll(ps)
	if refs[0].seg == refs[1].seg {
		t.Fatal("both results in one segment: the test did not make the spool switch segments")
	}
	if !errors.Is(errs[0], errDiskSync) {
		t.Errorf("result in the segment whose fsync failed: error %v, want the fsync's", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("result in the new segment, whose fsync succeeded: %v", errs[1])
	}
}

// pauseSyncs makes writers wait before their fsync (the group commit's
// lock held) until the returned function is called.
func pauseSyncs(s *spool) (resume func()) {
	s.syncMu.Lock()
	return s.syncMu.Unlock
}

// appendAsync appends one result in a goroutine once the spool has its
// append counter at want-1, and returns the channel of its error.
func appendAsync(t *testing.T, s *spool, logID int64) <-chan error {
	t.Helper()
	s.mu.Lock()
	want := s.written + 1
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := s.append(callbackParam{LogID: logID, LogDateTim: 5, HandleCode: 200}, true)
		done <- err
	}()
	for {
		s.mu.Lock()
		w := s.written
		s.mu.Unlock()
		if w >= want {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("append %d returned before it waited for its fsync: %v", logID, err)
		case <-time.After(time.Millisecond):
		}
	}
}

// A writer whose result went to a segment that a switch then closed with a
// failed fsync is told so: neither the close (nil file) nor the next
// segment's successful fsync makes its result durable.
func TestSpoolFailedSwitchSyncReachesWaiter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		newFails bool // creating the next segment fails too
	}{
		{name: "next segment synced"},
		{name: "next segment not created", newFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, d := faultySpool(t, t.TempDir())
			defer s.close()
			fillSegment(t, s, 1)
			resume := pauseSyncs(s)
			first := appendAsync(t, s, 1) // the old segment's last result, its fsync not yet made
			d.file(t, 0).failSyncs.Store(1 << 30)
			if tc.newFails {
				d.mu.Lock()
				d.createErr = errors.New("no space left on device (a test's failing disk)")
				d.mu.Unlock()
			}
			second := make(chan error, 1)
			go func() {
				_, err := s.append(callbackParam{LogID: 2, LogDateTim: 5, HandleCode: 200}, true)
				second <- err
			}()
			if tc.newFails {
				if err := <-second; err == nil {
					t.Fatal("append with no segment to write to: no error")
				}
			} else {
				waitWritten(t, s, segmentRecords+1)
			}
			resume()
			if err := <-first; !errors.Is(err, errDiskSync) {
				t.Errorf("result whose segment's fsync failed: error %v, want the fsync's", err)
			}
			if !tc.newFails {
				if err := <-second; err != nil {
					t.Errorf("result in the new segment: %v", err)
				}
			}
		})
	}
}

func waitWritten(t *testing.T, s *spool, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		w := s.written
		s.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("append counter %d, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// One fsync covers several writers (the group commit); when it fails, every
// one of them gets the error, though the next fsync of the same file (which
// on Linux may succeed without writing the dropped pages) succeeds.
func TestSpoolFailedSyncReachesEveryWaiter(t *testing.T) {
	t.Parallel()
	s, d := faultySpool(t, t.TempDir())
	defer s.close()
	if _, err := s.append(callbackParam{LogID: 100, LogDateTim: 5, HandleCode: 200}, true); err != nil {
		t.Fatal(err)
	}
	resume := pauseSyncs(s)
	a := appendAsync(t, s, 1)
	b := appendAsync(t, s, 2)
	d.file(t, 0).failSyncs.Store(1) // one fsync fails, the next succeeds
	resume()
	for i, ch := range []<-chan error{a, b} {
		if err := <-ch; !errors.Is(err, errDiskSync) {
			t.Errorf("writer %d covered by the failed fsync: error %v, want the fsync's", i+1, err)
		}
	}
	// Later results go to a new segment and are durable again.
	ref, err := s.append(callbackParam{LogID: 3, LogDateTim: 5, HandleCode: 200}, true)
	if err != nil {
		t.Fatalf("result after the failure: %v", err)
	}
	if ref.seg.first == 1 {
		t.Error("result after a failed fsync appended to the same segment")
	}
}

// Two fsyncs of one file at once: on Linux only one of them reports a
// writeback error, the other may succeed. A writer whose own fsync failed
// is told so even if a segment switch meanwhile synced the same file
// without an error.
func TestSpoolFailedSyncNotHiddenByConcurrentSync(t *testing.T) {
	t.Parallel()
	s, d := faultySpool(t, t.TempDir())
	defer s.close()
	fillSegment(t, s, 1)
	began, resume := d.file(t, 0).stallSync()
	first := make(chan error, 1)
	go func() { // the old segment's last result: its fsync stalls, then fails
		_, err := s.append(callbackParam{LogID: 1, LogDateTim: 5, HandleCode: 200}, true)
		first <- err
	}()
	<-began
	second := make(chan error, 1)
	go func() { // switches to a new segment while that fsync is in flight
		_, err := s.append(callbackParam{LogID: 2, LogDateTim: 5, HandleCode: 200}, true)
		second <- err
	}()
	waitWritten(t, s, segmentRecords+1)
	resume()
	if err := <-first; !errors.Is(err, errDiskSync) {
		t.Errorf("result whose fsync failed: error %v, want the fsync's", err)
	}
	if err := <-second; err != nil {
		t.Errorf("result in the new segment: %v", err)
	}
}
