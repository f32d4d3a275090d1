package xxljob_test

// Hostile input on the XXL-JOB port: every case gets a clear
// failure answer (HTTP 200 and a code-500 envelope, as the admin expects, or
// a plain HTTP error where net/http refuses the request before the
// executor sees it), the executor keeps serving, no handler runs, and
// nothing is written outside the log path.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

const hostileToken = "0123456789abcdef0123456789abcdef" // 32 bytes, like a generated token

// hostile is an executor whose log path sits inside a sandbox folder, so the
// test can see anything written next to it.
type hostile struct {
	*bundle
	sandbox string
	addr    string // http://host:port
	ran     atomic.Int64
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{sandbox: t.TempDir()}
	logPath := filepath.Join(h.sandbox, "logs")
	count := xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		h.ran.Add(1)
		req.Logf("param %q", req.Param)
		return nil
	})
	h.bundle = setup(t, opts{token: hostileToken, logPath: logPath, handlers: map[string]xxljob.Handler{"count": count},
		before: func(e *xxljob.Executor) { xxljob.SetAuthBurst(e, 1000) }}) // guessing is slowed: TestWrongTokensAreCountedLoggedAndSlowed
	h.addr = "http://" + h.exec.Addr().String()
	t.Cleanup(func() { requireOnlyLogs(t, h.sandbox) })
	return h
}

// post sends a raw request and returns status and body.
func (h *hostile) post(t *testing.T, method, path string, header http.Header, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, h.addr+path, body)
	require.NoError(t, err)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func tokenHeader(token string) http.Header {
	return http.Header{"Xxl-Job-Access-Token": {token}, "Content-Type": {"application/json;charset=UTF-8"}}
}

// stillServing checks the executor answers /beat at once.
func (h *hostile) stillServing(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	env, err := h.client.Beat(ctx)
	require.NoError(t, err, "the executor stopped serving")
	require.Equal(t, `{"code":200}`, string(env.Raw))
}

var logFileRE = regexp.MustCompile(`^logs(/\d{4,5}-\d{2}-\d{2}(/\d+\.log)?|/callbackspool(/callbacks-\d{20}\.(jsonl|ack))?)?$`)

// requireOnlyLogs fails if anything exists in the sandbox but the log path's
// date folders with numbered run logs and the callback spool.
func requireOnlyLogs(t *testing.T, sandbox string) {
	t.Helper()
	err := filepath.WalkDir(sandbox, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == sandbox {
			return err
		}
		rel, _ := filepath.Rel(sandbox, p)
		if !logFileRE.MatchString(filepath.ToSlash(rel)) {
			return fmt.Errorf("unexpected file %s", rel)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return fmt.Errorf("symlink %s", rel)
		}
		return nil
	})
	require.NoError(t, err, "something was written outside the run logs")
}

func TestHostileTokens(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	const wrong = `{"code":500,"msg":"The access token is wrong."}`
	body := func() io.Reader {
		return strings.NewReader(fmt.Sprintf(`{"jobId":1,"executorHandler":"count","logId":%d,"glueType":"BEAN"}`, nextLogID()))
	}
	last := hostileToken[len(hostileToken)-1:]
	cases := map[string]http.Header{
		"missing":                    {"Content-Type": {"application/json"}},
		"empty":                      tokenHeader(""),
		"one byte":                   tokenHeader("0"),
		"prefix, one byte short":     tokenHeader(hostileToken[:len(hostileToken)-1]),
		"same length, last differs":  tokenHeader(hostileToken[:len(hostileToken)-1] + "X"),
		"same length, first differs": tokenHeader("X" + hostileToken[1:]),
		"one byte longer":            tokenHeader(hostileToken + last),
		"upper case":                 tokenHeader(strings.ToUpper(hostileToken)),
		"UTF-8 lookalike":            tokenHeader(strings.Replace(hostileToken, "a", "а", 1)), // Cyrillic a
		"8 KiB":                      tokenHeader(strings.Repeat(hostileToken, 256)),
		"other header name":          {"X-Xxl-Job-Access-Token": {hostileToken}},
		"token in the query":         {"Content-Type": {"application/json"}},
		"wrong first, right second":  {"Xxl-Job-Access-Token": {"nope", hostileToken}},
	}
	for name, hdr := range cases {
		path := "/run"
		if name == "token in the query" {
			path = "/run?accessToken=" + hostileToken
		}
		for _, p := range []string{path, "/beat", "/log", "/kill", "/nowhere"} {
			status, got := h.post(t, http.MethodPost, p, hdr, body())
			require.Equal(t, http.StatusOK, status, name)
			require.Equal(t, wrong, got, "%s on %s", name, p)
		}
	}
	// Header values net/http itself refuses never reach the executor.
	status, _ := h.post(t, http.MethodPost, "/run", tokenHeader(strings.Repeat("x", 100<<10)), body())
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status, "a 100 KiB token")
	// Spaces around the value are not part of it (HTTP optional whitespace):
	// the padded token is the token, as for the Java executor's servlet.
	status, got := h.post(t, http.MethodPost, "/beat", tokenHeader(" \t"+hostileToken+" "), nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, `{"code":200}`, got)
	h.stillServing(t)
	require.Zero(t, h.ran.Load(), "a handler ran without the token")
	require.Empty(t, h.admin.Callbacks())
}

func TestHostilePathsAndMethods(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	hdr := tokenHeader(hostileToken)
	notFound := func(uri string) string {
		if len(uri) > 256 { // long input is echoed cut short
			uri = uri[:256] + "..."
		}
		return `{"code":500,"msg":"invalid request, uri-mapping(` + uri + `) not found."}`
	}
	for _, uri := range []string{
		"/run/", "/run;jsessionid=1", "/run%00", "/%72un", "/beat/../run", "/./run", "/run?", "/run?logId=1",
		"/run%2F..%2Flog", "/..%2f..%2fetc%2fpasswd", "/logs/2024-01-01/1.log", "/" + strings.Repeat("a", 4000),
		"/log%20", "/ВЫПОЛНИТЬ",
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.addr+"/", strings.NewReader(`{"jobId":1}`))
		require.NoError(t, err)
		req.URL.Opaque = "//" + req.URL.Host + uri // the raw path exactly as given
		req.Header = hdr
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, uri)
		want := notFound(uri)
		if uri == "/ВЫПОЛНИТЬ" {
			want = notFound("/%D0%92%D0%AB%D0%9F%D0%9E%D0%9B%D0%9D%D0%98%D0%A2%D0%AC")
		}
		require.Equal(t, want, string(b), uri)
	}
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch, "TRACE", "PROPFIND"} {
		status, got := h.post(t, method, "/run", hdr, strings.NewReader(`{"jobId":1,"executorHandler":"count","logId":1}`))
		require.Equal(t, http.StatusOK, status, method)
		require.Equal(t, `{"code":500,"msg":"invalid request, HttpMethod not support."}`, got, method)
	}
	status, got := h.post(t, http.MethodHead, "/run", hdr, nil)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, got, "HEAD has no body")
	// A request line net/http refuses (a URI over the header limit).
	status, _ = h.post(t, http.MethodPost, "/"+strings.Repeat("r", 100<<10), hdr, nil)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status)
	h.stillServing(t)
	require.Zero(t, h.ran.Load())
}

func TestHostileBodies(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	hdr := tokenHeader(hostileToken)
	nested := func(depth int) string {
		return `{"jobId":1,"executorHandler":"count","logId":5,"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	}
	manyKeys := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"jobId":1,"executorHandler":"nope","glueType":"BEAN","logId":6`)
		for i := range n {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		b.WriteString("}")
		return b.String()
	}
	cases := []struct {
		name, path, body string
		want             string // exact answer, or a prefix ending in "*"
	}{
		{"nested 100000 deep", "/run", nested(100000), `{"code":500,"msg":"request error:invalid JSON: invalid character '[' exceeded max depth"}`},
		{"nested 100000 deep /log", "/log", `{"logId":1,"logDateTim":1,"x":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat("}", 100000) + `}`, `{"code":500,"msg":"request error:invalid JSON: invalid character '{' exceeded max depth"}`},
		{"200k unknown keys (4.6 MB)", "/run", manyKeys(200000), `{"code":500,"msg":"job handler [nope] not found."}`},
		{"number with 1 MB of digits", "/kill", `{"jobId":` + strings.Repeat("9", 1<<20) + `}`, `{"code":500,"msg":"request error:invalid JSON: json: cannot unmarshal number *`},
		{"1e400", "/run", `{"jobId":1,"executorHandler":"count","logId":1e400}`, `{"code":500,"msg":"request error:invalid JSON: json: cannot unmarshal number 1e400 *`},
		{"invalid UTF-8", "/run", "{\"jobId\":1,\"executorHandler\":\"count\xff\xfe\",\"glueType\":\"BEAN\",\"logId\":7}", `{"code":500,"msg":"job handler [count` + "\ufffd\ufffd" + `] not found."}`},
		{"UTF-16 BOM", "/run", "\xfe\xff{\"jobId\":1}", `{"code":500,"msg":"request error:request body is not a JSON object"}`},
		{"two objects", "/run", `{"jobId":1,"executorHandler":"count","logId":8}{"jobId":2}`, `{"code":500,"msg":"request error:invalid JSON: invalid character '{' after top-level value"}`},
		{"duplicate keys, last wins", "/run", `{"jobId":1,"executorHandler":"count","executorHandler":"rm","glueType":"BEAN","logId":9}`, `{"code":500,"msg":"job handler [rm] not found."}`},
		{"5 MiB + 1 of whitespace", "/run", strings.Repeat(" ", 5<<20+1), ""}, // a bare 413
	}
	limit := adminWait() // the admin gives up after 3 s (more under -race)
	for _, tc := range cases {
		start := time.Now()
		status, got := h.post(t, http.MethodPost, tc.path, hdr, strings.NewReader(tc.body))
		if tc.want == "" {
			require.Equal(t, http.StatusRequestEntityTooLarge, status, tc.name)
		} else {
			require.Equal(t, http.StatusOK, status, tc.name)
		}
		if p, ok := strings.CutSuffix(tc.want, "*"); ok {
			require.True(t, strings.HasPrefix(got, p), "%s: %.300s", tc.name, got)
		} else {
			require.Equal(t, tc.want, got, tc.name)
		}
		require.Less(t, time.Since(start), limit, "%s: slower than the admin's 3 s timeout", tc.name)
	}

	// A chunked body far over the limit: the server stops reading at 5 MiB.
	pr, pw := io.Pipe()
	var sent atomic.Int64
	go func() {
		chunk := []byte(strings.Repeat("[", 64<<10))
		for sent.Load() < 200<<20 {
			n, err := pw.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.addr+"/run", pr)
	require.NoError(t, err)
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		require.Empty(t, string(b))
	}
	pr.CloseWithError(io.ErrClosedPipe)
	require.Less(t, sent.Load(), int64(50<<20), "the server read far past its limit")
	h.stillServing(t)
	require.Zero(t, h.ran.Load())
}

func TestHostileIDsAndLogPaths(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	run := func(body string) xxljobtest.Envelope {
		t.Helper()
		env, err := h.client.Post(t.Context(), "run", []byte(body))
		require.NoError(t, err)
		return env
	}
	refused := []struct{ body, msg string }{
		{`{"jobId":1,"executorHandler":"count","logId":0}`, "request error:logId must be > 0, got 0"},
		{`{"jobId":1,"executorHandler":"count","logId":-1}`, "request error:logId must be > 0, got -1"},
		{`{"jobId":1,"executorHandler":"count","logId":-9223372036854775808}`, "request error:logId must be > 0, got -9223372036854775808"},
		{`{"jobId":1,"executorHandler":"count","logId":9223372036854775808}`, "request error:invalid JSON: json: cannot unmarshal number 9223372036854775808 into Go struct field triggerParam.logId of type int64"},
		{`{"jobId":2147483648,"executorHandler":"count","logId":5}`, "request error:invalid JSON: json: cannot unmarshal number 2147483648 into Go struct field triggerParam.jobId of type int32"},
		{`{"jobId":1,"executorHandler":"count","logId":5,"logDateTime":-1}`, "request error:logDateTime out of range: -1"},
		{`{"jobId":1,"executorHandler":"count","logId":5,"logDateTime":253402300800000}`, "request error:logDateTime out of range: 253402300800000"},
		{`{"jobId":1,"executorHandler":"count","logId":5,"logDateTime":9223372036854775807}`, "request error:logDateTime out of range: 9223372036854775807"},
		{`{"jobId":1,"executorHandler":"count","logId":"../../etc/passwd"}`, "request error:invalid JSON: json: cannot unmarshal string into Go struct field triggerParam.logId of type int64"},
		{`{"jobId":1,"executorHandler":"count","logId":5,"logDateTime":"2024-01-01/../../x"}`, "request error:invalid JSON: json: cannot unmarshal string into Go struct field triggerParam.logDateTime of type int64"},
		{`{"jobId":1,"executorHandler":"count","logId":5.5}`, "request error:invalid JSON: json: cannot unmarshal number 5.5 into Go struct field triggerParam.logId of type int64"},
		{`{"jobId":1,"executorHandler":"../count","glueType":"BEAN","logId":5}`, "job handler [../count] not found."},
	}
	for _, tc := range refused {
		env := run(tc.body)
		require.Equal(t, 500, env.Code, tc.body)
		require.Equal(t, tc.msg, env.MsgString(), tc.body)
	}
	// Extreme but valid numbers run; their logs land in date folders under
	// the log path, named by the number.
	accepted := []xxljobtest.TriggerParam{
		{JobID: -2147483648, ExecutorHandler: "count", LogID: 9223372036854775807, LogDateTime: 0, GlueType: "BEAN", BroadcastTotal: 1},
		{JobID: 2147483647, ExecutorHandler: "count", LogID: 1, LogDateTime: 253402300799999, GlueType: "BEAN", BroadcastIndex: -1, BroadcastTotal: -5},
		{JobID: 0, ExecutorHandler: "count", LogID: nextLogID(), LogDateTime: time.Now().UnixMilli(), ExecutorTimeout: -2147483648, ExecutorParams: "../../x\x00; rm -rf /", GlueType: "BEAN"},
	}
	for _, p := range accepted {
		h.run(t, p)
		cb := h.callback(t, p.LogID)
		require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
		_, lr, err := h.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
		require.NoError(t, err)
		require.Contains(t, lr.LogContent, "xxl-job job execute start")
	}
	// /log with crafted references: refused or "not exists", never a file
	// outside the log path.
	outside := filepath.Join(h.sandbox, "secret.log")
	require.NoError(t, os.WriteFile(outside, []byte("secret\n"), 0o600))
	defer os.Remove(outside)
	for _, body := range []string{
		`{"logDateTim":0,"logId":-1,"fromLineNum":1}`,
		`{"logDateTim":-86400000,"logId":1,"fromLineNum":1}`,
		`{"logDateTim":1e20,"logId":1,"fromLineNum":1}`,
		`{"logDateTim":"../..","logId":1,"fromLineNum":1}`,
		`{"logDateTim":1,"logId":"../secret","fromLineNum":1}`,
		`{"logDateTim":1,"logId":2,"fromLineNum":-2147483648}`,
		`{"logDateTim":1,"logId":2,"fromLineNum":2147483647}`,
	} {
		env, err := h.client.Post(t.Context(), "log", []byte(body))
		require.NoError(t, err)
		require.NotContains(t, string(env.Raw), "secret", body)
		if env.Code == 200 {
			require.Contains(t, string(env.Raw), `"logContent":"readLog fail, logFile not exists"`, body)
		} else {
			require.True(t, strings.HasPrefix(env.MsgString(), "request error:"), "%s: %s", body, env.Raw)
		}
	}
	h.stillServing(t)
}

// GLUE (script) jobs are refused, whatever the type's spelling, and the
// script never runs.
func TestHostileGlueRefused(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, glue := range []string{"GLUE_GROOVY", "GLUE_SHELL", "GLUE_PYTHON", "GLUE_PYTHON2", "GLUE_PHP", "GLUE_NODEJS",
		"GLUE_POWERSHELL", "bean", "Bean", " BEAN", "BEAN ", "BEAN\x00", "JAVA", "GLUE_SHELL;BEAN", strings.Repeat("G", 1000)} {
		p := xxljobtest.Trigger(1, "count", nextLogID())
		p.GlueType, p.GlueSource = glue, "#!/bin/sh\ntouch "+marker
		env, err := h.client.Run(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, 500, env.Code, "glueType %q", glue)
		echoed := glue
		if len(echoed) > 256 { // long input is echoed cut short
			echoed = echoed[:256] + "..."
		}
		require.Equal(t, "glueType["+echoed+"] is not valid.", env.MsgString())
	}
	// A BEAN trigger carrying a script runs the compiled handler only.
	p := xxljobtest.Trigger(1, "count", nextLogID())
	p.GlueSource = "#!/bin/sh\ntouch " + marker
	h.run(t, p)
	require.Equal(t, 200, h.callback(t, p.LogID).HandleCode)
	require.Equal(t, int64(1), h.ran.Load())
	_, err := os.Stat(marker)
	require.ErrorIs(t, err, os.ErrNotExist, "a script from the wire ran")
	require.Len(t, h.admin.Callbacks(), 1, "no callback for a refused trigger")
}

// Slow-loris: connections that trickle their headers are cut by the
// server's ReadHeaderTimeout (5 s, fixed in Start); meanwhile the executor
// serves everyone else. (Bodies trickled after complete headers are cut by
// the 30 s ReadTimeout; the full fault suite checks that one on the binary.)
func TestHostileSlowLoris(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	const conns = 64
	var wg sync.WaitGroup
	cut := make([]time.Duration, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", h.exec.Addr().String())
			if err != nil {
				cut[i] = -1
				return
			}
			defer c.Close()
			start := time.Now()
			_, _ = io.WriteString(c, "POST /run HTTP/1.1\r\nHost: x\r\nXXL-JOB-ACCESS-TOKEN: ")
			buf := make([]byte, 1)
			for time.Since(start) < 15*time.Second {
				if _, err := c.Write([]byte("a")); err != nil {
					break
				}
				_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				if n, err := c.Read(buf); n > 0 || errors.Is(err, io.EOF) || (err != nil && !isTimeout(err)) {
					break // the server answered or hung up
				}
			}
			cut[i] = time.Since(start)
		}()
	}
	// While they trickle, the executor answers at once.
	for range 10 {
		time.Sleep(300 * time.Millisecond)
		h.stillServing(t)
	}
	wg.Wait()
	for i, d := range cut {
		require.Positive(t, d, "conn %d", i)
		require.Less(t, d, 8*time.Second, "slow connection %d lived %s: the header timeout did not hold", i, d)
	}
	h.stillServing(t)
	require.Zero(t, h.ran.Load())
}

// stormCallbacks is the executor's config for the storms, which count
// repeated callbacks: an admin answer that comes after the client's timeout
// (the process starved on a loaded machine, GOMAXPROCS=1 and the race
// detector) is a delivery the executor rightly sends again, at least
// once, and the admin counts the repeat. The storms wait for the answer.
func stormCallbacks(c *xxljob.Config) { c.HTTPClientTimeout = 30 * time.Second }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Thousands of concurrent /run calls: every one is answered, every accepted
// trigger runs and calls back once, and afterwards the goroutines are back to
// where they were. Not parallel: it counts the process's goroutines.
func TestHostileConcurrentRuns(t *testing.T) {
	const calls, jobs = 3000, 40
	var ran atomic.Int64
	h := setup(t, opts{token: hostileToken,
		handlers: map[string]xxljob.Handler{"count": xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
			ran.Add(1)
			return nil
		})},
		before: func(e *xxljob.Executor) { xxljob.SetIdleTimeout(e, 100*time.Millisecond) },
		cfg:    stormCallbacks,
	})
	addr := "http://" + h.exec.Addr().String()
	settle := func() int {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	tr := &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	// burst sends n concurrent triggers with logIds first.. and waits for
	// their callbacks; it returns how many were accepted.
	burst := func(n int) (first int64, accepted int64) {
		first = logIDs.Add(int64(n)) + 1000 - int64(n) + 1 // a block of nextLogID's ids
		var wg sync.WaitGroup
		var ok, failed atomic.Int64
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"jobId":%d,"executorHandler":"count","logId":%d,"logDateTime":%d,"glueType":"BEAN","broadcastTotal":1}`,
					1+i%jobs, first+int64(i), time.Now().UnixMilli())
				req, _ := http.NewRequest(http.MethodPost, addr+"/run", strings.NewReader(body))
				req.Header = tokenHeader(hostileToken)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					return
				}
				b, _ := io.ReadAll(bufio.NewReader(resp.Body))
				resp.Body.Close()
				if string(b) == `{"code":200}` {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		require.Zero(t, failed.Load(), "calls without an answer")
		// Each run writes its start and its result durably; thousands of
		// them on a loaded machine under the race detector take seconds
		// (the failing run still had 127 queued after 14 s).
		for i := range n {
			require.Equal(t, 200, h.callbackWithin(t, first+int64(i), 30*time.Second).HandleCode)
		}
		tr.CloseIdleConnections()
		waitFor(t, func() bool { return xxljob.ThreadCount(h.exec) == 0 }, "job threads did not exit")
		return first, ok.Load()
	}

	// Warm up: the executor's admin client keeps up to 4 idle keep-alive
	// connections to the admin (3 goroutines each, counting the fake admin's
	// side); after a first burst some exist, and "before" counts them.
	burst(200)
	before := settle()
	ran.Store(0)

	first, accepted := burst(calls)
	require.Equal(t, int64(calls), accepted, "triggers refused")
	require.Equal(t, int64(calls), ran.Load())
	const slack = 12 // the admin client's idle connections may grow to 4 (see above)
	after := settle()
	for deadline := time.Now().Add(10 * time.Second); after > before+slack && time.Now().Before(deadline); after = settle() {
		time.Sleep(100 * time.Millisecond)
	}
	if after > before+slack {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("%d concurrent /run: goroutines %d before, %d after", calls, before, after)
	for i := range calls {
		require.Zero(t, h.admin.Repeats(first+int64(i)), "log %d called back twice", first+int64(i))
	}
}

// A caller's long strings are cut before they reach a log line, with a
// marker giving the original length: a 4 MiB unknown handler name was
// written whole into the process log (one 4,194,736-byte line). The
// answers keep the admin's 256-character echo.
func TestHostileStringsCutInLogs(t *testing.T) {
	t.Parallel()
	quiet := xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error { return nil })
	b := setup(t, opts{token: hostileToken, handlers: map[string]xxljob.Handler{"quiet": quiet}})
	b.client.SetTimeout(adminWait()) // for the 4 MiB bodies below

	const limit = 2 << 10 // no process log line comes near this
	for _, tc := range []struct {
		name, handler, glue, answer, logged string
	}{
		{"4 MiB handler name", strings.Repeat("h", 4<<20), "BEAN",
			"job handler [" + strings.Repeat("h", 256) + "...] not found.",
			`handler="` + strings.Repeat("h", 256) + `...[cut: 4194304 bytes]"`},
		{"multi-byte handler name", strings.Repeat("é", 1000), "BEAN",
			"job handler [" + strings.Repeat("é", 128) + "...] not found.",
			`handler="` + strings.Repeat("é", 128) + `...[cut: 2000 bytes]"`},
		{"handler name at the bound", strings.Repeat("n", 256), "BEAN",
			"job handler [" + strings.Repeat("n", 256) + "] not found.",
			`handler=` + strings.Repeat("n", 256) + ` msg=`},
		{"1 MiB glue type", "quiet", strings.Repeat("G", 1<<20),
			"glueType[" + strings.Repeat("G", 256) + "...] is not valid.",
			`msg="glueType[` + strings.Repeat("G", 256) + `...] is not valid."`},
	} {
		p := xxljobtest.Trigger(1, tc.handler, nextLogID())
		p.GlueType = tc.glue
		env, err := b.client.Run(t.Context(), p)
		require.NoError(t, err, tc.name)
		require.Equal(t, 500, env.Code, tc.name)
		require.Equal(t, tc.answer, env.MsgString(), tc.name)
		require.Contains(t, b.logs.String(), tc.logged, tc.name)
	}
	// A 1 MiB param runs (the handler gets it whole); its run log line is cut.
	p := xxljobtest.Trigger(1, "quiet", nextLogID())
	p.ExecutorParams = strings.Repeat("p", 1<<20)
	b.run(t, p)
	require.Equal(t, 200, b.callback(t, p.LogID).HandleCode)
	runLog := b.runLog(t, p)
	require.Contains(t, runLog, "----------- Param:"+strings.Repeat("p", 16<<10)+"...[cut: 1048576 bytes]\n")
	require.Less(t, len(runLog), 20<<10)
	// A request error that repeats the caller's text is cut in the answer.
	status, got := (&hostile{bundle: b, addr: "http://" + b.exec.Addr().String()}).post(t, http.MethodPost, "/kill",
		tokenHeader(hostileToken), strings.NewReader(`{"jobId":`+strings.Repeat("9", 1<<20)+`}`))
	require.Equal(t, http.StatusOK, status)
	require.Less(t, len(got), 400, "%.300s", got)
	require.True(t, strings.HasSuffix(got, `..."}`), "%.300s", got)

	for line := range strings.Lines(b.logs.String()) {
		require.Less(t, len(line), limit, "process log line: %.300s", line)
	}
}

// Members are matched by their exact names, as the Java executor's Gson
// does: encoding/json alone also takes "LogId" or "LOGID" for logId, so a
// body naming logId twice in two spellings ran, logged and reported
// whichever came last, and a case variant could change the glue type or
// the job an answer is about. Case variants are ignored like any unknown
// member; a name repeated exactly keeps its last value (Gson's rule too).
func TestHostileMembersMatchExactNames(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	now := time.Now().UnixMilli()
	first, second, third := nextLogID(), nextLogID(), nextLogID()
	env, err := h.client.Post(t.Context(), "run", fmt.Appendf(nil,
		`{"jobId":1,"executorHandler":"count","glueType":"BEAN","logDateTime":%d,"logId":%d,"LogId":%d,"LOGID":%d,"GlueType":"GLUE_SHELL","EXECUTORPARAMS":"x"}`,
		now, first, second, third))
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))
	require.Equal(t, 200, h.callback(t, first).HandleCode)
	// logId repeated exactly: the last one counts.
	repeated := nextLogID()
	env, err = h.client.Post(t.Context(), "run", fmt.Appendf(nil,
		`{"jobId":1,"executorHandler":"count","glueType":"BEAN","logDateTime":%d,"logId":%d,"logId":%d}`, now, second, repeated))
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))
	require.Equal(t, 200, h.callback(t, repeated).HandleCode)
	require.Equal(t, int64(2), h.ran.Load())
	for _, id := range []int64{second, third} {
		_, ok := h.admin.Callback(id)
		require.False(t, ok, "a run reported as logId %d, a case variant's value", id)
	}
	require.Len(t, h.admin.Callbacks(), 2)

	// The other bodies: a case variant is not the member.
	for _, tc := range []struct{ path, body, want string }{
		{"run", `{"jobId":1,"ExecutorHandler":"count","glueType":"BEAN","logId":` + strconv.FormatInt(nextLogID(), 10) + `}`,
			"500 job handler [] not found."},
		{"run", `{"jobId":1,"executorHandler":"count","GLUETYPE":"BEAN","logId":` + strconv.FormatInt(nextLogID(), 10) + `}`,
			"500 glueType[null] is not valid."},
		{"run", `{"jobId":1,"executorHandler":"count","glueType":"BEAN","logid":5}`,
			"500 request error:logId must be > 0, got 0"},
		{"kill", `{"JobId":1}`, "200 job thread already killed."}, // job 0's thread, which never existed
		{"log", fmt.Sprintf(`{"logDateTim":%d,"logId":%d,"LogId":%d,"fromLineNum":1,"FromLineNum":3}`, now, first, repeated),
			`"fromLineNum":1,`},
		{"log", fmt.Sprintf(`{"LogDateTim":%d,"logId":%d,"fromLineNum":1}`, now, first),
			`"logContent":"readLog fail, logFile not exists"`}, // no trigger time: 1970's folder
	} {
		env, err := h.client.Post(t.Context(), tc.path, []byte(tc.body))
		require.NoError(t, err)
		if tc.path == "log" {
			require.Contains(t, string(env.Raw), tc.want, tc.body)
			continue
		}
		require.Equal(t, tc.want, fmt.Sprintf("%d %s", env.Code, env.MsgString()), tc.body)
	}
	_, lr, err := h.client.Log(t.Context(), now, first, 1)
	require.NoError(t, err)
	require.Contains(t, lr.LogContent, "----------- Param:\n", "EXECUTORPARAMS is not executorParams")
	h.stillServing(t)
}

// Concurrent triggers of the same few jobs, each with a random block
// strategy (the three, none and an unknown one), handler (one that honours
// cancellation, one that does not) and sometimes a timeout, mixed with
// /kill and /idleBeat: every accepted trigger is called back exactly once,
// with a result that names why it ended; a refused one (Discard Later)
// never; and every job thread exits once idle.
func TestHostileSameJobStorm(t *testing.T) {
	t.Parallel()
	pause := func() <-chan time.Time { return time.After(time.Duration(rand.IntN(3)) * time.Millisecond) }
	polite := xxljob.HandlerFunc(func(ctx context.Context, _ *xxljob.Request) error {
		select {
		case <-pause():
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	stubborn := xxljob.HandlerFunc(func(context.Context, *xxljob.Request) error {
		<-pause()
		return nil
	})
	b := setup(t, opts{token: hostileToken, handlers: map[string]xxljob.Handler{"polite": polite, "stubborn": stubborn},
		before: func(e *xxljob.Executor) { xxljob.SetIdleTimeout(e, 50*time.Millisecond) }, cfg: stormCallbacks})
	strategies := []string{"SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY", "", "NO_SUCH_STRATEGY"}
	const calls, jobs = 600, 3
	// The storm is about outcomes, not latency: a /run answered after the
	// admin's 3 s (the race detector on a loaded machine) is still an
	// answer, where b.client would give up and leave the outcome unknown.
	runs := xxljobtest.NewClient("http://"+b.exec.Addr().String(), hostileToken, xxljobtest.V24)
	runs.SetTimeout(30 * time.Second)
	t.Cleanup(runs.Close)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	accepted := map[int64]bool{}
	refused := map[int64]string{}
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := 1 + i%jobs
			p := xxljobtest.Trigger(job, []string{"polite", "stubborn"}[rand.IntN(2)], nextLogID())
			p.ExecutorBlockStrategy = strategies[rand.IntN(len(strategies))]
			if rand.IntN(10) == 0 {
				p.ExecutorTimeout = 1
			}
			start := time.Now()
			env, err := runs.Run(context.Background(), p)
			took := time.Since(start)
			switch rand.IntN(20) {
			case 0:
				_, _ = b.client.Kill(context.Background(), job)
			case 1:
				_, _ = b.client.IdleBeat(context.Background(), job)
			}
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, took)
			switch {
			case err != nil:
				refused[p.LogID] = err.Error()
			case env.Code == 200:
				accepted[p.LogID] = true
			default:
				refused[p.LogID] = env.MsgString()
			}
		}()
	}
	wg.Wait()
	ended := regexp.MustCompile(`^(|(block strategy effect：Cover Early|change jobhandler or glue type, and terminate the old job thread\.|scheduling center kill job\.) \[job (running, killed|not executed, in the job queue, killed\.)\])$`)
	for id := range accepted {
		cb := b.callbackWithin(t, id, 20*time.Second)
		if cb.HandleCode == 200 {
			require.Empty(t, cb.HandleMsg)
		} else {
			require.Equal(t, 500, cb.HandleCode, "log %d: %s", id, cb.HandleMsg)
			require.NotEmpty(t, cb.HandleMsg, "log %d", id)
		}
		require.Regexp(t, ended, cb.HandleMsg, "log %d", id)
	}
	for id, msg := range refused {
		require.Equal(t, "block strategy effect：Discard Later", msg, "log %d", id)
	}
	waitFor(t, func() bool { return xxljob.ThreadCount(b.exec) == 0 }, "job threads did not exit")
	require.Len(t, b.admin.Callbacks(), len(accepted), "a refused trigger was called back")
	for id := range accepted {
		require.Zero(t, b.admin.Repeats(id), "log %d called back twice", id)
	}
	t.Logf("%d accepted, %d discarded, slowest /run answer %s", len(accepted), len(refused), slowest)
}
