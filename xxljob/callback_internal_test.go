package xxljob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAdmin answers /api/callback, refusing every batch while refuse is
// set, and records the logIds of the batches it accepted.
type fakeAdmin struct {
	mu       sync.Mutex
	refuse   bool
	accepted []int64
}

var logIDField = regexp.MustCompile(`"logId":(\d+)`)

func (a *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse {
		_, _ = w.Write([]byte(`{"code":500,"msg":"refused by a test's admin"}`))
		return
	}
	for _, m := range logIDField.FindAllSubmatch(body, -1) {
		id, _ := strconv.ParseInt(string(m[1]), 10, 64)
		a.accepted = append(a.accepted, id)
	}
	_, _ = w.Write([]byte(`{"code":200,"msg":null}`))
}

func (a *fakeAdmin) setRefuse(v bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refuse = v
}

func (a *fakeAdmin) got() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.accepted)
}

// syncBuffer is a log destination written by several goroutines (the
// external tests use it too, as SyncBuffer).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// faultyCallbacker returns the callback side of an executor whose admin is
// a fakeAdmin and whose spool's files are a faultyDisk's, with its log.
func faultyCallbacker(t *testing.T) (*callbacker, *spool, *faultyDisk, *fakeAdmin, *syncBuffer) {
	t.Helper()
	admin := &fakeAdmin{}
	srv := httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	logs := &syncBuffer{}
	e, s, d := faultyExecutor(t, Config{AdminAddresses: []string{srv.URL}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return e.callback, s, d, admin, logs
}

// A result kept in memory only (the spool could not be written when it
// came) whose first delivery is refused is written to the spool again;
// when that write's fsync fails, the record is still in the spool file,
// waiting on disk: the retry loop delivers it from there, and a restart
// finds it too. The log says it is not durable, not that it is lost.
func TestCallbackRefusedRewriteSyncFailsNotLost(t *testing.T) {
	t.Parallel()
	c, s, d, admin, logs := faultyCallbacker(t)
	d.mu.Lock()
	d.createErr = errors.New("no space left on device (a test's failing disk)")
	d.mu.Unlock()
	c.push(callbackParam{LogID: 42, LogDateTim: 5, HandleCode: 200})
	batch := c.take()
	if len(batch) != 1 || batch[0].ref.seg != nil {
		t.Fatalf("queued %+v, want the result in memory only", batch)
	}

	d.mu.Lock()
	d.createErr, d.failNew = nil, 1<<30 // the disk takes the re-write but fails its fsync
	d.mu.Unlock()
	admin.setRefuse(true)
	ctx := context.Background()
	if c.first(ctx, batch) {
		t.Fatal("a refusing admin accepted the batch")
	}
	if got := s.pending(); got != 1 {
		t.Fatalf("%d results waiting on disk, want the re-written one", got)
	}
	out := logs.String()
	if strings.Contains(out, "result lost") {
		t.Errorf("log says the result is lost though it waits in the spool:\n%s", out)
	}
	if !strings.Contains(out, `level=WARN msg="callback result not durable`) {
		t.Errorf("log does not warn that the result is not durable:\n%s", out)
	}

	// A restart (another process on the same files) finds it.
	restarted := mustOpenSpool(t, s.dir)
	if ids := diskIDs(t, restarted); !slices.Equal(ids, []int64{42}) {
		t.Errorf("a restart finds %v waiting, want [42]", ids)
	}
	restarted.close()

	// The retry loop delivers it from the file.
	admin.setRefuse(false)
	c.retrySpool(ctx, make(chan struct{}))
	if got := admin.got(); !slices.Equal(got, []int64{42}) {
		t.Errorf("admin accepted %v, want [42]", got)
	}
	if got := s.pending(); got != 0 {
		t.Errorf("%d results still waiting after the retry loop delivered them", got)
	}
}

// A result whose record's fsync failed is delivered from memory; the
// delivery marks that record too, so the segment is removed (at the next
// switch) and a restart does not send the result again.
func TestCallbackUnsyncedRecordMarkedOnDelivery(t *testing.T) {
	t.Parallel()
	c, s, d, admin, _ := faultyCallbacker(t)
	d.failNewFiles(1 << 30) // the result's fsync fails
	c.push(callbackParam{LogID: 42, LogDateTim: 5, HandleCode: 200})
	first := segmentFiles(t, s.dir)
	if !c.first(context.Background(), c.take()) {
		t.Fatal("batch not delivered")
	}
	if got := admin.got(); !slices.Equal(got, []int64{42}) {
		t.Fatalf("admin accepted %v, want [42]", got)
	}
	d.failNewFiles(0)
	if _, err := s.append(callbackParam{LogID: 43, LogDateTim: 5, HandleCode: 200}, false); err != nil {
		t.Fatal(err) // switches away from the failed segment
	}
	for _, name := range first {
		if slices.Contains(segmentFiles(t, s.dir), name) {
			t.Errorf("%s kept though its only result was delivered", name)
		}
	}
	restarted := mustOpenSpool(t, s.dir)
	defer restarted.close()
	if ids := diskIDs(t, restarted); !slices.Equal(ids, []int64{43}) {
		t.Errorf("a restart finds %v waiting, want [43] (42 was delivered)", ids)
	}
}

// A result whose record's fsync failed, refused on its first delivery, is
// written again for the retry loop: the new record replaces the first, so
// it is not sent twice.
func TestCallbackUnsyncedRecordReplacedWhenRewritten(t *testing.T) {
	t.Parallel()
	c, s, d, admin, _ := faultyCallbacker(t)
	d.failNewFiles(1 << 30)
	c.push(callbackParam{LogID: 42, LogDateTim: 5, HandleCode: 200})
	d.failNewFiles(0) // the re-write is durable
	admin.setRefuse(true)
	ctx := context.Background()
	if c.first(ctx, c.take()) {
		t.Fatal("a refusing admin accepted the batch")
	}
	if ids := diskIDs(t, s); !slices.Equal(ids, []int64{42}) {
		t.Errorf("waiting on disk: %v, want 42 once", ids)
	}
	restarted := mustOpenSpool(t, s.dir)
	if ids := diskIDs(t, restarted); !slices.Equal(ids, []int64{42}) {
		t.Errorf("a restart finds %v waiting, want 42 once", ids)
	}
	restarted.close()
	admin.setRefuse(false)
	c.retrySpool(ctx, make(chan struct{}))
	if got := admin.got(); !slices.Equal(got, []int64{42}) {
		t.Errorf("admin accepted %v, want 42 once", got)
	}
}

// A result whose record's fsync failed and that finds the memory queue
// closed (a run ending at shutdown) waits in the spool file for the retry
// loop or the next start; it is not logged as lost.
func TestCallbackUnsyncedRecordLeftToRetryWhenClosed(t *testing.T) {
	t.Parallel()
	c, s, d, _, logs := faultyCallbacker(t)
	d.failNewFiles(1 << 30)
	c.flush(context.Background()) // closes the memory queue
	c.push(callbackParam{LogID: 42, LogDateTim: 5, HandleCode: 200})
	if got := s.pending(); got != 1 {
		t.Errorf("%d results waiting on disk, want 1", got)
	}
	if out := logs.String(); strings.Contains(out, "result lost") || !strings.Contains(out, `level=WARN msg="callback result not durable`) {
		t.Errorf("log does not warn that the result is not durable, or says it is lost:\n%s", out)
	}
	restarted := mustOpenSpool(t, s.dir)
	defer restarted.close()
	if ids := diskIDs(t, restarted); !slices.Equal(ids, []int64{42}) {
		t.Errorf("a restart finds %v waiting, want [42]", ids)
	}
}

// A result that finds the memory queue full goes to the retry loop, but
// only once its run's log is complete: persist is called before the log's
// end lines are written, queue after them. Were the retry loop to see it
// in between, the admin could get the result first and end its log page
// without the last lines.
func TestCallbackOverflowWaitsForTheRunLog(t *testing.T) {
	t.Parallel()
	c, s, _, _, _ := faultyCallbacker(t)
	c.size = 1
	c.push(callbackParam{LogID: 1, LogDateTim: 5, HandleCode: 200}) // fills the queue
	queue := c.persist(callbackParam{LogID: 2, LogDateTim: 5, HandleCode: 200}, spoolRef{})
	if got := s.pending(); got != 0 {
		t.Errorf("before its log is complete, %d results wait for the retry loop, want 0", got)
	}
	if ids := diskIDs(t, s); len(ids) != 0 {
		t.Errorf("before its log is complete, the retry loop would send %v, want none", ids)
	}
	queue()
	if ids := diskIDs(t, s); !slices.Equal(ids, []int64{2}) {
		t.Errorf("after its log is complete, the retry loop would send %v, want [2]", ids)
	}
}
