package xxljob

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
