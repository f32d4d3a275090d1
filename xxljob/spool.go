package xxljob

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// spool is the callback journal in {LogPath}/callbackspool/. Every result is
// appended to it (and made durable) before it is queued for the admin, and
// marked delivered once an admin accepted it, so a crash at any point loses
// no finished result: at the next start whatever is not marked is sent
// again (a result sent twice is harmless, the admin keeps the first).
//
// Files are segments of at most segmentRecords results, one JSON object a
// line, named by the sequence number of their first result:
//
//	callbacks-00000000000000000042.jsonl  {"seq":42,"logId":…,"handleCode":…}
//	callbacks-00000000000000000042.ack    "42\n43\n" (delivered seqs)
//
// A result is written once and acknowledged once (two appends); a segment
// whose results are all delivered is removed.
//
// The same files hold each run's start record, written and synced before
// its handler is called and acknowledged once the run's result is in the
// spool (see runstart.go):
//
//	{"seq":43,"logId":…,"logDateTim":…,"start":{"at":…,"handler":…,…}}
//
// A start record is never sent; it keeps its segment until acknowledged.
//
// No operation lists the folder except opening the spool at start, so each
// costs O(1) however many results wait during a long admin outage. In memory the spool keeps one
// byte of state per result of each live segment.
type spool struct {
	dir string

	mu      sync.Mutex
	segs    []*segment  // oldest first; the last may be active
	active  segmentFile // appends go here; nil until the first append
	nextSeq uint64
	onDisk  int    // results in recDisk across segments
	written uint64 // appends made, counted for the group commit below
	line    []byte // encoding buffer

	// Filled by openSpool: the start records not acknowledged (runs an
	// earlier process began), and what results it found for each run.
	starts  []unfinishedRun
	results map[runID]byte // resultWritten or resultInterrupted

	// Group commit: an append returns once an fsync covering it is done;
	// one caller syncs for everybody written before it (syncRound). synced
	// is the last append number fsyncs have covered, successful or not: a
	// segment whose fsync failed says which of its records that leaves not
	// durable (segment.notDurable). Every fsync of a results file is made
	// under syncMu, one at a time: of two fsyncs of one file at once, Linux
	// may report a writeback error to one only, and the other's success
	// would then vouch for pages that never reached the disk.
	syncMu  sync.Mutex
	synced  atomic.Uint64
	syncs   atomic.Uint64 // fsyncs the group commit made (tests count them)
	retired []retiredFile // files of segments switched away from, not synced yet

	// create makes a new segment's results file: createSegment, or in
	// tests one whose fsync fails as a failing disk's does.
	create func(name string) (segmentFile, error)
}

// retiredFile is a results file no longer appended to, left for the
// next syncRound to sync and close.
type retiredFile struct {
	f   segmentFile
	seg *segment
}

// segmentFile is what the spool does with the results file it appends to.
type segmentFile interface {
	io.Writer
	Sync() error
	Close() error
}

func createSegment(name string) (segmentFile, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
}

// Result states.
const (
	recDone    byte = iota // delivered (or a gap: a torn or unreadable line)
	recDisk                // on disk only: the retry loop delivers it
	recMemory              // also queued in memory: the sender delivers it
	recRunning             // a run's start record whose result is not written yet
)

type segment struct {
	first  uint64 // seq of state[0]
	state  []byte
	live   int // results not done
	onDisk int // results in recDisk
	sealed bool
	ack    *os.File // opened at the first acknowledgement

	// syncErr is the first failed fsync of the segment's file; its records
	// after append number durableTo (those no earlier fsync covered) are
	// not durable. See fail.
	syncErr   error
	durableTo uint64
}

// spoolRef names one result in the spool.
type spoolRef struct {
	seg *segment
	seq uint64
}

type spoolRecord struct {
	Seq uint64 `json:"seq"`
	callbackParam
	// Start makes the line a run's start record rather than a result.
	Start *runStart `json:"start,omitempty"`
	// Interrupted marks the failure result a restart wrote for a run that
	// an earlier process started and never finished.
	Interrupted bool `json:"interrupted,omitempty"`
}

const (
	spoolDirName     = "callbackspool"
	segmentPrefix    = "callbacks-"
	segmentSuffix    = ".jsonl"
	ackSuffix        = ".ack"
	segmentRecords   = 10000
	tempPrefix       = ".tmp-"
	legacySpoolDir   = "callbacklog"  // ours before, and the Java 2.x executor's
	javaSpoolDir     = "callbacklogs" // the Java 3.3+ executor's
	importedSuffix   = ".imported"
	unreadableSuffix = ".bad"
)

func segmentName(first uint64) string {
	return fmt.Sprintf("%s%020d", segmentPrefix, first)
}

// openSpool reads what an earlier process left: it removes temporary
// files, rebuilds the state of every segment from its results and
// acknowledgements, and removes segments with nothing left to deliver.
// torn counts result lines that could not be read (a crash while writing
// one leaves an unfinished last line; that result was never queued).
func openSpool(dir string) (s *spool, torn int, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	s = &spool{dir: dir, results: map[runID]byte{}, create: createSegment}
	var firsts []uint64
	acks := map[uint64]bool{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tempPrefix):
			_ = os.Remove(filepath.Join(dir, name))
		case strings.HasPrefix(name, segmentPrefix) && strings.HasSuffix(name, segmentSuffix):
			if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segmentPrefix), segmentSuffix), 10, 64); err == nil {
				firsts = append(firsts, n)
			}
		case strings.HasPrefix(name, segmentPrefix) && strings.HasSuffix(name, ackSuffix):
			if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segmentPrefix), ackSuffix), 10, 64); err == nil {
				acks[n] = true
			}
		}
	}
	slices.Sort(firsts)
	for _, first := range firsts {
		seg, bad, err := s.loadSegment(first)
		if err != nil {
			return nil, torn, fmt.Errorf("read %s: %w", segmentName(first)+segmentSuffix, err)
		}
		torn += bad
		delete(acks, first)
		s.nextSeq = max(s.nextSeq, seg.first+uint64(len(seg.state)))
		if seg.live == 0 {
			s.removeSegment(seg)
			continue
		}
		s.segs = append(s.segs, seg)
		s.onDisk += seg.onDisk
	}
	for first := range acks { // acknowledgements of a segment already removed
		_ = os.Remove(filepath.Join(dir, segmentName(first)+ackSuffix))
	}
	s.nextSeq = max(s.nextSeq, 1)
	s.resolveStarts()
	return s, torn, nil
}

func (s *spool) loadSegment(first uint64) (*segment, int, error) {
	seg := &segment{first: first, sealed: true}
	base := filepath.Join(s.dir, segmentName(first))
	bad := 0
	err := readLines(base+segmentSuffix, func(line []byte) {
		var r spoolRecord
		if json.Unmarshal(line, &r) != nil || r.Seq < first || r.Seq-first >= 2*segmentRecords || r.LogID <= 0 {
			bad++
			return
		}
		for uint64(len(seg.state)) <= r.Seq-first {
			seg.state = append(seg.state, recDone)
		}
		if seg.state[r.Seq-first] != recDone {
			return // a repeated seq: the first line counts
		}
		if r.Start != nil {
			seg.state[r.Seq-first] = recRunning
			s.starts = append(s.starts, unfinishedRun{ref: spoolRef{seg: seg, seq: r.Seq}, logID: r.LogID, logDateTim: r.LogDateTim, start: *r.Start})
		} else {
			seg.state[r.Seq-first] = recDisk
			k := runID{r.LogID, r.LogDateTim}
			s.results[k] = max(s.results[k], resultOf(r))
		}
		seg.live++
	}, func() { bad++ })
	if err != nil {
		return nil, bad, err
	}
	err = readLines(base+ackSuffix, func(line []byte) {
		seq, perr := strconv.ParseUint(string(line), 10, 64)
		if perr == nil && seq >= first && seq-first < uint64(len(seg.state)) && seg.state[seq-first] != recDone {
			seg.state[seq-first] = recDone
			seg.live--
		}
	}, func() {})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, bad, err
	}
	for _, st := range seg.state {
		if st == recDisk {
			seg.onDisk++
		}
	}
	return seg, bad, nil
}

// readLines calls fn for each complete line of the file and unfinished for
// a last line without "\n" (a write cut short by a crash).
func readLines(path string, fn func([]byte), unfinished func()) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(bytes.TrimSpace(line)) > 0 {
				unfinished()
			}
			return nil
		}
		if err != nil {
			return err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			fn(line)
		}
	}
}

// append writes one result, durably, and returns its reference. queued
// says whether the caller keeps it in memory and delivers it itself;
// otherwise the retry loop delivers it from disk.
func (s *spool) append(p callbackParam, queued bool) (spoolRef, error) {
	st := recDisk
	if queued {
		st = recMemory
	}
	return s.write(spoolRecord{callbackParam: p}, st)
}

// appendAll writes several results in memory state (as append with
// queued), durable together: one fsync covers them all, where appending
// them one after another waits for one each (a /kill of a job with a long
// queue reports every queued trigger before it answers). errs[i] is the
// error of ps[i], nil when it is durable: results on both sides of a
// segment switch may differ.
func (s *spool) appendAll(ps []callbackParam) (refs []spoolRef, errs []error) {
	refs, errs = make([]spoolRef, len(ps)), make([]error, len(ps))
	ws := make([]uint64, len(ps))
	var last uint64
	s.mu.Lock()
	for i, p := range ps {
		if refs[i], ws[i], errs[i] = s.writeLocked(spoolRecord{callbackParam: p}, recMemory); errs[i] == nil {
			last = ws[i]
		}
	}
	s.mu.Unlock()
	s.waitSynced(last)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range errs {
		if errs[i] == nil {
			errs[i] = refs[i].seg.notDurable(ws[i])
		}
	}
	return refs, errs
}

// write appends one record in state st (recDisk, recMemory or recRunning)
// and returns once it is durable, or with the error of the fsync that
// failed to make it so (the record is then in the spool but may not
// survive a crash: the caller treats it as not written).
func (s *spool) write(rec spoolRecord, st byte) (spoolRef, error) {
	s.mu.Lock()
	ref, w, err := s.writeLocked(rec, st)
	s.mu.Unlock()
	if err != nil {
		return spoolRef{}, err
	}
	s.waitSynced(w)
	s.mu.Lock()
	defer s.mu.Unlock()
	return ref, ref.seg.notDurable(w)
}

// writeLocked appends one record in state st and returns its reference
// and its append number, for waitSynced.
func (s *spool) writeLocked(rec spoolRecord, st byte) (spoolRef, uint64, error) {
	seg, err := s.activeLocked()
	if err != nil {
		return spoolRef{}, 0, err
	}
	seq := s.nextSeq
	s.line = s.line[:0]
	rec.Seq = seq
	b, err := json.Marshal(rec)
	if err != nil {
		return spoolRef{}, 0, err
	}
	s.line = append(append(s.line, b...), '\n')
	if _, err := s.active.Write(s.line); err != nil {
		// Part of the line may be in the file: later results go to a new
		// segment, so they never share a line with this one.
		s.retireActiveLocked()
		return spoolRef{}, 0, err
	}
	s.nextSeq++
	if st == recDisk {
		seg.onDisk++
		s.onDisk++
	}
	seg.state = append(seg.state, st)
	seg.live++
	s.written++
	if len(seg.state) >= segmentRecords {
		seg.sealed = true // the next append starts a new segment
	}
	return spoolRef{seg: seg, seq: seq}, s.written, nil
}

// activeLocked returns the segment appends go to, starting a new one when
// the last is sealed (full, or after a write error).
func (s *spool) activeLocked() (*segment, error) {
	if n := len(s.segs); s.active != nil && n > 0 && !s.segs[n-1].sealed {
		return s.segs[n-1], nil
	}
	s.retireActiveLocked()
	name := filepath.Join(s.dir, segmentName(s.nextSeq)+segmentSuffix)
	f, err := s.create(name)
	if err != nil {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil { // the new name must survive a crash too
		_ = f.Close()
		_ = os.Remove(name)
		return nil, err
	}
	seg := &segment{first: s.nextSeq}
	s.segs = append(s.segs, seg)
	s.active = f
	return seg, nil
}

// retireActiveLocked seals the active segment and leaves its file to the
// next syncRound, which syncs and closes it: not here, under s.mu, where
// appends would wait for the fsync and it could run beside syncRound's
// fsync of the same file. A segment left with nothing to deliver is
// removed.
func (s *spool) retireActiveLocked() {
	if s.active == nil {
		return
	}
	// The active file is always the last segment's: ack and this function
	// drop a segment only once it is no longer active.
	last := s.segs[len(s.segs)-1]
	s.retired = append(s.retired, retiredFile{f: s.active, seg: last})
	s.active = nil
	last.sealed = true
	if last.live == 0 {
		s.dropLocked(last)
	}
}

// waitSynced returns once an fsync covers append number w, successful or
// not: segment.notDurable then says which.
func (s *spool) waitSynced(w uint64) {
	if s.synced.Load() >= w {
		return
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced.Load() < w {
		s.syncRound()
	}
}

// syncRound syncs every file holding appends not covered yet: the retired
// ones (then closed) and the active one. Called with s.syncMu held.
func (s *spool) syncRound() {
	before := s.synced.Load()
	s.mu.Lock()
	retired, f, target := s.retired, s.active, s.written
	var seg *segment
	if f != nil {
		seg = s.segs[len(s.segs)-1]
	}
	s.retired = nil
	s.mu.Unlock()
	// Files are retired only under s.mu and synced only here, under
	// s.syncMu: f is not synced or closed elsewhere meanwhile.
	type failure struct {
		seg *segment
		err error
	}
	var failed []failure
	for _, r := range retired {
		s.syncs.Add(1)
		if err := r.f.Sync(); err != nil {
			failed = append(failed, failure{r.seg, err})
		}
		_ = r.f.Close()
	}
	if f != nil {
		s.syncs.Add(1)
		if err := f.Sync(); err != nil {
			failed = append(failed, failure{seg, err})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fl := range failed {
		fl.seg.fail(fl.err, before)
	}
	s.bumpSynced(target)
}

// fail records a failed fsync of seg's file and seals seg, so no more
// results go to it. Its records no successful fsync covered before
// are not durable, and stay so whatever a later fsync returns: after a
// failed fsync Linux may have dropped the dirty pages (marked clean, the
// error reported once), so a retried fsync can succeed without writing
// them. Rewriting them to a fresh segment would need their lines kept in
// memory and, on a disk that just failed, would most likely fail too, so
// each writer is told instead (notDurable) and handles it as a failed
// write: a result is kept in memory and delivered from there, a run whose
// start is not durable is not run. The records stay in the file (a
// restart still finds any the disk kept: sent twice at worst).
// Called with s.mu held.
func (seg *segment) fail(err error, durableTo uint64) {
	if seg.syncErr == nil {
		seg.syncErr = fmt.Errorf("fsync %s: %w", segmentName(seg.first)+segmentSuffix, err)
		seg.durableTo = durableTo
	}
	seg.sealed = true
}

// notDurable returns the error that left append number w of seg not
// durable, nil if it is; w must be covered by an fsync (waitSynced).
// Called with s.mu held.
func (seg *segment) notDurable(w uint64) error {
	if seg.syncErr != nil && w > seg.durableTo {
		return seg.syncErr
	}
	return nil
}

func (s *spool) bumpSynced(n uint64) {
	for {
		cur := s.synced.Load()
		if cur >= n || s.synced.CompareAndSwap(cur, n) {
			return
		}
	}
}

// ack marks delivered results. A full segment with nothing left is removed.
// Acknowledgements are not synced: one lost in a crash only means that
// result is sent again.
func (s *spool) ack(refs []spoolRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for seg, seqs := range groupBySegment(refs) {
		var b []byte
		for _, seq := range seqs {
			i := seq - seg.first
			if seg.state[i] == recDone {
				continue
			}
			if seg.state[i] == recDisk {
				seg.onDisk--
				s.onDisk--
			}
			seg.state[i] = recDone
			seg.live--
			b = strconv.AppendUint(b, seq, 10)
			b = append(b, '\n')
		}
		if seg.live == 0 && seg.sealed && !s.isActive(seg) {
			s.dropLocked(seg)
			continue
		}
		if len(b) == 0 {
			continue
		}
		if seg.ack == nil {
			f, err := os.OpenFile(filepath.Join(s.dir, segmentName(seg.first)+ackSuffix), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			seg.ack = f
		}
		if _, err := seg.ack.Write(b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *spool) isActive(seg *segment) bool {
	n := len(s.segs)
	return s.active != nil && n > 0 && s.segs[n-1] == seg
}

// release hands results whose first delivery failed to the retry loop.
func (s *spool) release(refs []spoolRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		if i := r.seq - r.seg.first; r.seg.state[i] == recMemory {
			r.seg.state[i] = recDisk
			r.seg.onDisk++
			s.onDisk++
		}
	}
}

// dropLocked removes a segment with nothing left to deliver: the results
// file first, so a crash in between leaves only an orphan acknowledgement
// file, which the next start removes.
func (s *spool) dropLocked(seg *segment) {
	s.removeSegment(seg)
	if i := slices.Index(s.segs, seg); i >= 0 {
		s.segs = slices.Delete(s.segs, i, i+1)
	}
}

func (s *spool) removeSegment(seg *segment) {
	if seg.ack != nil {
		_ = seg.ack.Close()
		seg.ack = nil
	}
	base := filepath.Join(s.dir, segmentName(seg.first))
	_ = os.Remove(base + segmentSuffix)
	_ = os.Remove(base + ackSuffix)
}

// pending returns the number of results waiting on disk for the retry loop.
func (s *spool) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.onDisk
}

// spoolItem is a result read back from disk.
type spoolItem struct {
	p   callbackParam
	ref spoolRef
	// unsynced: ref's record is in the spool but its fsync failed. The
	// item is delivered from memory; ref lets that delivery mark the
	// record, which would otherwise keep its segment until a restart
	// sends it again.
	unsynced bool
}

// diskBatches reads the results waiting on disk, oldest first, and hands
// them to visit in batches of at most size; visit returns false to stop.
// Segments are read whole, once per call, never per result.
func (s *spool) diskBatches(size int, visit func([]spoolItem) bool) error {
	s.mu.Lock()
	var segs []*segment
	for _, seg := range s.segs {
		if seg.onDisk > 0 {
			segs = append(segs, seg)
		}
	}
	s.mu.Unlock()
	var batch []spoolItem
	stopped := false
	for _, seg := range segs {
		err := readLines(filepath.Join(s.dir, segmentName(seg.first)+segmentSuffix), func(line []byte) {
			if stopped {
				return
			}
			var r spoolRecord
			if json.Unmarshal(line, &r) != nil || r.Seq < seg.first {
				return
			}
			s.mu.Lock()
			waiting := r.Seq-seg.first < uint64(len(seg.state)) && seg.state[r.Seq-seg.first] == recDisk
			s.mu.Unlock()
			if !waiting {
				return
			}
			batch = append(batch, spoolItem{p: r.callbackParam, ref: spoolRef{seg: seg, seq: r.Seq}})
			if len(batch) == size {
				stopped = !visit(batch)
				batch = nil
			}
		}, func() {}) // the active segment's last line may be mid-write
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if stopped {
			return nil
		}
	}
	if len(batch) > 0 {
		visit(batch)
	}
	return nil
}

// close syncs and closes the files; the spool is not used afterwards.
func (s *spool) close() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	s.retireActiveLocked()
	for _, seg := range s.segs {
		if seg.ack != nil {
			_ = seg.ack.Close()
			seg.ack = nil
		}
	}
	s.mu.Unlock()
	s.syncRound()
}

func groupBySegment(refs []spoolRef) map[*segment][]uint64 {
	m := map[*segment][]uint64{}
	for _, r := range refs {
		if r.seg != nil {
			m[r.seg] = append(m[r.seg], r.seq)
		}
	}
	return m
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
