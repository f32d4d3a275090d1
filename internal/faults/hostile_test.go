package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob/xxljobtest"
)

const apiToken = "faults-api-token"

// Scenario 8: hostile clients on both ports of the real binary (`executor
// serve`): connections that trickle their headers (cut by the 5 s
// ReadHeaderTimeout) or, in the full suite, their body (cut by the 30 s
// ReadTimeout) while the executor keeps serving; thousands of concurrent
// /run calls of orderTimeoutCloseJob, each answered and called back once,
// with the process's goroutines (pprof, on the API port) back to where they
// were; nothing written outside the log path; and the orders closed once.
func scenarioHostilePorts(t *testing.T, h *harness, r *report) {
	db, res, base, e := seeded(t, 2000, 8)
	admin := xxljobtest.New(t, xxljobtest.Options{Token: adminToken})
	sandbox := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	e = serveEnv(e, admin, freePort(t)).with(
		"XXL_JOB_EXECUTOR_LOGPATH", filepath.Join(sandbox, "logs"),
		"EXECUTOR_API_ADDR", apiAddr, "EXECUTOR_API_TOKEN", apiToken, "EXECUTOR_API_PPROF", "true")
	s := h.serve(t, "serve-hostile", e)
	xxlAddr := strings.TrimPrefix(strings.TrimSuffix(s.address, "/"), "http://")

	// Slow-loris on both ports while the executor serves.
	var wg sync.WaitGroup
	var headerCuts [2][]time.Duration
	var mu sync.Mutex
	for port, addr := range []string{xxlAddr, apiAddr} {
		for range 16 {
			wg.Go(func() {
				d := trickle(addr, "POST /run HTTP/1.1\r\nHost: x\r\nX-Slow: ", 20*time.Second)
				mu.Lock()
				headerCuts[port] = append(headerCuts[port], d)
				mu.Unlock()
			})
		}
	}
	var bodyCuts []time.Duration
	if h.p.name == "full" {
		for _, addr := range []string{xxlAddr, apiAddr} {
			wg.Go(func() {
				head := "POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nXXL-JOB-ACCESS-TOKEN: " + adminToken + "\r\n\r\n{"
				d := trickle(addr, head, 45*time.Second)
				mu.Lock()
				bodyCuts = append(bodyCuts, d)
				mu.Unlock()
			})
		}
	}
	for range 10 {
		time.Sleep(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		env, err := s.client.Beat(ctx)
		cancel()
		require.NoError(t, err, "the executor stopped serving under slow-loris")
		require.Equal(t, 200, env.Code)
		resp, err := http.Get("http://" + apiAddr + "/healthz")
		require.NoError(t, err, "the API port stopped serving under slow-loris")
		resp.Body.Close()
	}
	wg.Wait()
	worst := time.Duration(0)
	for _, cuts := range headerCuts {
		for _, d := range cuts {
			require.Less(t, d, 8*time.Second, "a slow header lived %s", d)
			worst = max(worst, d)
		}
	}
	r.add("32 slow-header connections cut after at most %.1fs (both ports kept serving)", worst.Seconds())
	for _, d := range bodyCuts {
		require.Less(t, d, 35*time.Second, "a slow body lived %s", d)
		require.Greater(t, d, 25*time.Second, "a slow body was cut before the read timeout: %s", d)
	}
	if len(bodyCuts) > 0 {
		r.add("2 slow-body connections cut after %.1fs and %.1fs", bodyCuts[0].Seconds(), bodyCuts[1].Seconds())
	}

	// Hostile requests to the real API port's request decoders.
	for _, tc := range []struct {
		token, body string
		status      int
	}{
		{"", `{"bizUuid":"a","handler":"orderTimeoutClose","delayMs":1}`, http.StatusUnauthorized},
		{apiToken[:len(apiToken)-1], `{"bizUuid":"a","handler":"orderTimeoutClose","delayMs":1}`, http.StatusUnauthorized},
		{apiToken, `{"bizUuid":"n","handler":"orderTimeoutClose","delayMs":1,"payload":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, http.StatusBadRequest},
		{apiToken, `{"bizUuid":"big","handler":"orderTimeoutClose","delayMs":1,"payload":"` + strings.Repeat("x", 200<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{apiToken, `{"bizUuid":"x'; DROP TABLE job_delay_task; --","handler":"orderTimeoutClose","delayMs":1}`, http.StatusBadRequest},
		{apiToken, `{"bizUuid":"e","handler":"http:orders/../../admin","delayMs":1}`, http.StatusBadRequest},
		{apiToken, `{"bizUuid":"g","handler":"orderTimeoutClose","delayMs":1,"glueSource":"rm -rf /"}`, http.StatusBadRequest},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/api/delay-tasks", strings.NewReader(tc.body))
		require.NoError(t, err)
		req.Header.Set("X-Executor-Token", tc.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "%.80s: %s", tc.body, b)
		require.Contains(t, string(b), `"error"`)
	}
	var tasks int
	require.NoError(t, db.Get(&tasks, "SELECT COUNT(*) FROM job_delay_task"))
	require.Zero(t, tasks, "a hostile registration was stored")
	r.add("7 hostile delayed-task registrations refused (401/400/413)")

	// Thousands of concurrent /run calls, after a warm-up on the same jobs
	// (job threads, pools and keep-alive connections exist in both counts).
	const jobs = 40
	var nextLog atomic.Int64
	burst := func(n int) []int64 {
		ids := make([]int64, n)
		var wg sync.WaitGroup
		var refused atomic.Int64
		tr := &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256}
		defer tr.CloseIdleConnections()
		c := xxljobtest.NewClient(s.address, adminToken, xxljobtest.V24)
		defer c.Close()
		for i := range n {
			id := nextLog.Add(1)
			ids[i] = id
			wg.Go(func() {
				p := xxljobtest.Trigger(1+i%jobs, "orderTimeoutCloseJob", id)
				p.ExecutorParams = "pageSize=100"
				env, err := c.Run(context.Background(), p)
				if err != nil || env.Code != 200 {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		require.Zero(t, refused.Load(), "triggers refused or unanswered")
		for _, id := range ids {
			cb, err := admin.WaitCallback(id, 2*time.Minute)
			require.NoError(t, err)
			require.Equal(t, 200, cb.HandleCode, cb.HandleMsg)
		}
		return ids
	}
	burst(jobs * 3)
	before := goroutines(t, apiAddr)
	calls := 2000
	began := time.Now()
	ids := burst(calls)
	took := time.Since(began)
	after := goroutines(t, apiAddr)
	for deadline := time.Now().Add(10 * time.Second); after > before+30 && time.Now().Before(deadline); after = goroutines(t, apiAddr) {
		time.Sleep(200 * time.Millisecond)
	}
	// Slack: the database pool's connection watchers (up to 16) and the
	// admin client's keep-alive connections (up to 4, 2 goroutines each).
	require.LessOrEqual(t, after, before+30, "goroutines %d before, %d after %d /run calls", before, after, calls)
	repeats := 0
	for _, id := range ids {
		repeats += admin.Repeats(id)
	}
	require.Zero(t, repeats, "callbacks delivered twice")
	r.add("%d concurrent /run answered and called back once in %.1fs; goroutines %d before, %d after", calls, took.Seconds(), before, after)

	s.stop(t)
	requireOnlyRunLogs(t, sandbox)
	r.add("nothing written outside the log path")
	l := measure(t, db.DB, base, time.Time{})
	r.final(l)
	requireClean(t, l)
	require.Equal(t, res.Due, l.Due)
}

// trickle opens a connection, sends head and then one byte per 500 ms until
// the server answers or hangs up, or limit passes; it returns how long the
// connection lived.
func trickle(addr, head string, limit time.Duration) time.Duration {
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return -1
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		return time.Since(start)
	}
	buf := make([]byte, 512)
	for time.Since(start) < limit {
		if _, err := c.Write([]byte("a")); err != nil {
			break
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		var ne net.Error
		if n > 0 || (err != nil && (!errors.As(err, &ne) || !ne.Timeout())) {
			break
		}
	}
	return time.Since(start)
}

// goroutines reads the executor's goroutine count from pprof.
func goroutines(t *testing.T, apiAddr string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+apiAddr+"/debug/pprof/goroutine?debug=1", nil)
	require.NoError(t, err)
	req.Header.Set("X-Executor-Token", apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`total (\d+)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	n, _ := strconv.Atoi(m[1])
	return n
}

var runLogRE = regexp.MustCompile(`^logs(/\d{4,5}-\d{2}-\d{2}(/\d+\.log)?|/callbackspool(/callbacks-\d{20}\.(jsonl|ack))?)?$`)

func requireOnlyRunLogs(t *testing.T, sandbox string) {
	t.Helper()
	err := filepath.WalkDir(sandbox, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == sandbox {
			return err
		}
		rel, _ := filepath.Rel(sandbox, p)
		if !runLogRE.MatchString(filepath.ToSlash(rel)) {
			return fmt.Errorf("unexpected file %s", rel)
		}
		return nil
	})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(sandbox, "logs"))
	require.NoError(t, err, "no run logs at all")
}
