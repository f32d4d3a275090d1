package xxljob

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// discardResponse is an http.ResponseWriter that only counts bytes.
type discardResponse struct {
	h http.Header
	n int64
}

func (d *discardResponse) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discardResponse) Write(b []byte) (int, error) { d.n += int64(len(b)); return len(b), nil }
func (d *discardResponse) WriteHeader(int)             {}

// bigLogExecutor returns an executor whose log path holds one run log of
// about size bytes, and the /log body that reads it from line 1.
func bigLogExecutor(tb testing.TB, size int) (*Executor, []byte) {
	tb.Helper()
	e, err := New(Config{OpenWithoutToken: true, AdminAddresses: []string{"http://127.0.0.1:1/a"}, AppName: "bench", LogPath: tb.TempDir(),
		AdminVersion: Admin2x})
	if err != nil {
		tb.Fatal(err)
	}
	const logID, at = 42, 1700000000123
	path, err := e.logs.path(logID, at)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	pad := strings.Repeat("x", 70)
	for n := 0; n < size; {
		k, _ := fmt.Fprintf(w, "2026-01-02 03:04:05.678 [INFO] line %08d %s \"q\" é\n", n/100, pad)
		n += k
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return e, []byte(fmt.Sprintf(`{"logDateTim":%d,"logId":%d,"fromLineNum":1}`, at, logID))
}

// BenchmarkLogAnswer streams a whole run log into a /log answer. B/op stays
// flat as the file grows: the answer is never held in memory.
func BenchmarkLogAnswer(b *testing.B) {
	for _, size := range []int{1 << 20, 5 << 20, 50 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			e, body := bigLogExecutor(b, size)
			rw := &discardResponse{}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				rw.n = 0
				e.serveLog(rw, body)
			}
			if rw.n < int64(size) {
				b.Fatalf("answer of %d bytes for a %d-byte log", rw.n, size)
			}
		})
	}
}

// TestLogAnswerMemory: answering for a 32 MiB log allocates well under a
// MiB (buffers), not the file's size.
func TestLogAnswerMemory(t *testing.T) {
	e, body := bigLogExecutor(t, 32<<20)
	rw := &discardResponse{}
	e.serveLog(rw, body) // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 3
	for range runs {
		rw.n = 0
		e.serveLog(rw, body)
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("answer of %d bytes: %d bytes allocated per answer", rw.n, perRun)
	if rw.n < 32<<20 {
		t.Fatalf("answer of %d bytes for a 32 MiB log", rw.n)
	}
	if perRun > 1<<20 {
		t.Fatalf("%d bytes allocated per answer: the log is held in memory", perRun)
	}
}

// TestLogAnswerReadErrorStaysJSON: the file shrinking under an answer that
// has begun (retention cleanup, a person) ends the content with a line
// saying so, and the answer stays valid JSON.
func TestLogAnswerReadErrorStaysJSON(t *testing.T) {
	t.Parallel()
	e, body := bigLogExecutor(t, 1<<20)
	p, err := decodeLogParam(body)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := e.logs.path(p.LogID, p.LogDateTim)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := scanLog(f, 1, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 100<<10); err != nil { // after the first pass, before the copy
		t.Fatal(err)
	}
	var out strings.Builder
	if err := writeLogAnswer(&out, dialect2x, s); err == nil {
		t.Fatal("no error reported for a file that shrank")
	}
	var env struct {
		Code    int       `json:"code"`
		Content logResult `json:"content"`
	}
	if err := json.Unmarshal([]byte(out.String()), &env); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	if !strings.HasSuffix(env.Content.LogContent, lineReadError+"the log file shrank while it was read\n") {
		t.Fatalf("content ends %q", env.Content.LogContent[max(0, len(env.Content.LogContent)-200):])
	}
	if !strings.HasPrefix(env.Content.LogContent, "2026-01-02 03:04:05.678 [INFO] line 00000000") {
		t.Fatal("what was read before the error is kept")
	}
}
