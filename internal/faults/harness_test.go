package faults_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/orderdemo"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

var (
	flagBounded = flag.Bool("faults", false, "run the fault suite in its bounded form (CI: well under 2 minutes)")
	flagFull    = flag.Bool("faults.full", false, "run the fault suite in full (20 kills, a 30 s Redis outage, more data)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The test's own connections see the restarts too; the driver's notes
	// about it are noise here.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	goleak.VerifyTestMain(m)
}

// profile sizes the suite. The bounded form keeps every scenario and every
// check, with fewer iterations, a shorter outage and less data.
type profile struct {
	name          string
	kills         int           // scenario 1: kill -9 iterations
	killOrders    int           // scenario 1: orders generated
	restarts      int           // scenario 2: MariaDB restarts during runs
	redisOutage   time.Duration // scenario 3
	adminRuns     int           // scenario 4: triggers whose callbacks wait for the admin
	adminRetryWay bool          // scenario 4: also wait for the 30 s spool retry of a running executor
	shardOrders   int           // scenario 5
	slowOrders    int           // scenario 6
	slowRounds    int           // scenario 6: slow transactions taken over
	clockOffsets  []string      // scenario 7: FAKETIME offsets of the database server
	galeraOrders  int           // scenarios 10 and 13: orders closed through a three-node Galera cluster
	switchOrders  int           // scenario 12: orders closed across a primary switch
	shopOrders    int           // scenario 16: orders of the declared shop, over 2 databases of 4 tables
}

var (
	bounded = profile{name: "bounded", kills: 8, killOrders: 2500, restarts: 2, redisOutage: 5 * time.Second,
		adminRuns: 6, shardOrders: 3000, slowOrders: 200, slowRounds: 2, clockOffsets: []string{"+3d", "-3d"},
		galeraOrders: 3000, switchOrders: 3000, shopOrders: 2400}
	full = profile{name: "full", kills: 20, killOrders: 6000, restarts: 6, redisOutage: 30 * time.Second,
		adminRuns: 20, adminRetryWay: true, shardOrders: 10000, slowOrders: 600, slowRounds: 6, clockOffsets: []string{"+3d", "-3d", "+400d", "-400d"},
		galeraOrders: 10000, switchOrders: 10000, shopOrders: 8000}
)

// harness is what every scenario shares: the executor binary built from this
// tree, and the profile.
type harness struct {
	bin string
	p   profile
}

func newHarness(t *testing.T, p profile) *harness {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "executor")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/executor")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return &harness{bin: bin, p: p}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	mod := strings.TrimSpace(string(out))
	require.NotEmpty(t, mod, "not inside the module")
	return filepath.Dir(mod)
}

// ---------------------------------------------------------------------------
// Child processes

// child is one executor process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	done   chan struct{}
	code   int // exit code; -1 killed by a signal
	start  time.Time
	dur    time.Duration
}

// env is an executor configuration as environment variables.
type env map[string]string

// baseEnv is the configuration every child gets; scenarios add to it. The
// admin address is a closed port: `run` never calls it, `serve` overrides it.
func baseEnv(t *testing.T, dsn, redisAddr, prefix string) env {
	return env{
		"MYSQL_DSN":                        dsn,
		"MYSQL_TIME_ZONE":                  "",
		"REDIS_ADDR":                       redisAddr,
		"ORDER_CLOSE_LOCK_KEY_PREFIX":      prefix,
		"ORDER_CLOSE_LOCK_TTL":             "2s",
		"XXL_JOB_EXECUTOR_LOGPATH":         t.TempDir(),
		"XXL_JOB_ADMIN_ADDRESSES":          "http://127.0.0.1:1/xxl-job-admin",
		"XXL_JOB_EXECUTOR_APPNAME":         "order-job-faults",
		"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT": "5s",
		"XXL_JOB_ADMIN_TIMEOUT":            "1s",
		"EXECUTOR_API_ADDR":                "",
		"DELAY_ENABLED":                    "false",
		"LOG_FORMAT":                       "text",
		"LOG_LEVEL":                        "info",
	}
}

func (e env) with(kv ...string) env {
	out := env{}
	for k, v := range e {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// start starts the executor binary with args; it is killed when the test
// ends if it still runs.
func (h *harness) start(t *testing.T, name string, e env, args ...string) *child {
	t.Helper()
	c := &child{name: name, done: make(chan struct{}), code: -1}
	cmd := exec.Command(h.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range e {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = &c.stdout, &c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd = cmd
	c.start = time.Now()
	require.NoError(t, cmd.Start(), "start %s", name)
	go func() {
		err := cmd.Wait()
		c.dur = time.Since(c.start)
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			c.code = ee.ExitCode()
		} else if err == nil {
			c.code = 0
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		c.signal(syscall.SIGKILL)
		<-c.done
		if t.Failed() {
			t.Logf("%s stdout (tail):\n%s\n%s stderr (tail):\n%s", name, tail(c.stdout.String(), 30), name, tail(c.stderr.String(), 30))
		}
	})
	return c
}

func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(sig)
	}
}

// kill9 kills the process and waits for it.
func (c *child) kill9() {
	c.signal(syscall.SIGKILL)
	<-c.done
}

// wait waits for the exit and returns the exit code, failing the test after
// timeout (a hung executor is a failure of its own).
func (c *child) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		c.kill9()
		t.Fatalf("%s did not exit within %s\nstdout:\n%s\nstderr:\n%s", c.name, timeout, tail(c.stdout.String(), 30), tail(c.stderr.String(), 30))
		return -1
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// runJob runs `executor run orderTimeoutCloseJob` to completion and returns
// the child.
func (h *harness) runJob(t *testing.T, name string, e env, param, shard string) *child {
	t.Helper()
	c := h.start(t, name, e, runArgs(param, shard)...)
	c.wait(t, 2*time.Minute)
	return c
}

func runArgs(param, shard string) []string {
	args := []string{"run", "orderTimeoutCloseJob"}
	if param != "" {
		args = append(args, "-param", param)
	}
	if shard != "" {
		args = append(args, "-shard", shard)
	}
	return args
}

// summary is the run's summary line (the result message).
type summary struct {
	Scanned, Closed, SkippedPaid, SkippedLocked, DeadLettered int
	LockErrors                                                int
	Conflicts                                                 int // transactions retried after a deadlock or a certification conflict
	Found                                                     bool
}

var (
	summaryRE   = regexp.MustCompile(`scanned=(\d+) closed=(\d+) skipped_paid=(\d+) skipped_locked=(\d+) dead_lettered=(\d+) seconds=[0-9.]+( lock_errors=(\d+))?([ a-z_=0-9]*)`)
	conflictsRE = regexp.MustCompile(` conflicts=(\d+)`)
)

// parseSummary finds the last summary line in s.
func parseSummary(s string) summary {
	ms := summaryRE.FindAllStringSubmatch(s, -1)
	if len(ms) == 0 {
		return summary{}
	}
	m := ms[len(ms)-1]
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	sum := summary{Scanned: n(1), Closed: n(2), SkippedPaid: n(3), SkippedLocked: n(4), DeadLettered: n(5), Found: true}
	if m[7] != "" {
		sum.LockErrors = n(7)
	}
	if c := conflictsRE.FindStringSubmatch(m[0]); c != nil {
		sum.Conflicts, _ = strconv.Atoi(c[1])
	}
	return sum
}

// ---------------------------------------------------------------------------
// Data and the ledger

// seeded is a fresh database holding n demo orders (demo, from seed) with
// the invariants' baseline, and the environment of an executor on it and
// the shared Redis, under a key prefix of the test's own.
func seeded(t *testing.T, n int, seed uint64) (*dbtest.DB, orderdemo.Result, *ordertest.Baseline, env) {
	t.Helper()
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	res := demo(t, db.DB, n, seed)
	return db, res, snapshot(t, db.DB), baseEnv(t, db.DSN, redistest.Addr(), prefix)
}

// demo generates orders in db (create times from the database clock).
func demo(t *testing.T, db *sqlx.DB, n int, seed uint64) orderdemo.Result {
	t.Helper()
	return demoSKUs(t, db, n, seed, 150)
}

// demoSKUs is demo with items drawn from skus SKUs (many SKUs: closes of
// different orders rarely share a stock row).
func demoSKUs(t *testing.T, db *sqlx.DB, n int, seed uint64, skus int) orderdemo.Result {
	t.Helper()
	res, err := orderdemo.Generate(context.Background(), db, orderdemo.Spec{
		Orders: n, SKUs: skus, DueFraction: 0.8, PaidFraction: 0.1, NotDueFraction: 0.1,
		CouponFraction: 0.3, Seed: seed, OrderNoPrefix: fmt.Sprintf("F%d-", seed),
	})
	require.NoError(t, err)
	return res
}

func snapshot(t *testing.T, db *sqlx.DB) *ordertest.Baseline {
	t.Helper()
	b, err := ordertest.Snapshot(context.Background(), db)
	require.NoError(t, err)
	return b
}

// dbNow reads the database clock.
func dbNow(t *testing.T, db *sqlx.DB) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, db.Get(&now, "SELECT NOW(3)"))
	return now
}

// ledger is what a scenario reports about the orders.
type ledger struct {
	Due         int // unpaid at the baseline and due by asOf (closed or still open)
	Closed      int // closed now
	Compensated int // closed, exactly one close-log row, coupon back
	Doubled     int // extra close-log rows + SKUs whose stock was given back twice
	Lost        int // due by asOf and still unpaid
	Early       int // closed before their deadline (database clock)
	DeadLetters int // order_dead_letter rows not resolved
	Violations  []string
}

func (l ledger) String() string {
	s := fmt.Sprintf("due=%d closed=%d compensated=%d doubled=%d lost=%d", l.Due, l.Closed, l.Compensated, l.Doubled, l.Lost)
	if l.Early > 0 {
		s += fmt.Sprintf(" early=%d", l.Early)
	}
	if l.DeadLetters > 0 {
		s += fmt.Sprintf(" dead_letters=%d", l.DeadLetters)
	}
	if len(l.Violations) > 0 {
		s += fmt.Sprintf(" violations=%d", len(l.Violations))
	}
	return s
}

// measure computes the ledger: due by asOf (a database time; zero means
// NOW()), against the baseline's invariants.
func measure(t *testing.T, db *sqlx.DB, base *ordertest.Baseline, asOf time.Time) ledger {
	t.Helper()
	ctx := context.Background()
	if asOf.IsZero() {
		asOf = dbNow(t, db)
	}
	var l ledger
	var row struct {
		Closed int `db:"closed"`
		Lost   int `db:"lost"`
		Early  int `db:"early"`
	}
	require.NoError(t, db.GetContext(ctx, &row, `
SELECT COALESCE(SUM(status = 2), 0) AS closed,
       COALESCE(SUM(status = 0 AND create_time + INTERVAL timeout_minutes MINUTE <= ?), 0) AS lost,
       COALESCE(SUM(status = 2 AND close_time < create_time + INTERVAL timeout_minutes MINUTE), 0) AS early
FROM order_info`, asOf))
	l.Closed, l.Lost, l.Early = row.Closed, row.Lost, row.Early
	l.Due = l.Closed + l.Lost
	require.NoError(t, db.GetContext(ctx, &l.Compensated, `
SELECT COUNT(*) FROM order_info o
JOIN (SELECT order_no, COUNT(*) AS n FROM order_close_log GROUP BY order_no) cl ON cl.order_no = o.order_no AND cl.n = 1
LEFT JOIN user_coupon c ON c.id = o.coupon_id
WHERE o.status = 2 AND (o.coupon_id IS NULL OR (c.status = 0 AND c.order_no IS NULL))`))
	var dupLogs, overReleased int
	require.NoError(t, db.GetContext(ctx, &dupLogs, `SELECT COUNT(*) - COUNT(DISTINCT order_no) FROM order_close_log`))
	// Stock given back twice leaves less locked than the unpaid orders hold.
	require.NoError(t, db.GetContext(ctx, &overReleased, `
SELECT COUNT(*) FROM inventory i
LEFT JOIN (SELECT it.sku_id, SUM(it.quantity) AS q FROM order_item it
           JOIN order_info o ON o.order_no = it.order_no AND o.status = 0 GROUP BY it.sku_id) h ON h.sku_id = i.sku_id
WHERE i.locked < COALESCE(h.q, 0)`))
	l.Doubled = dupLogs + overReleased
	require.NoError(t, db.GetContext(ctx, &l.DeadLetters, `SELECT COUNT(*) FROM order_dead_letter WHERE status <> 'resolved'`))
	if err := ordertest.Check(ctx, db, base); err != nil {
		var ve *ordertest.ViolationsError
		ok := errors.As(err, &ve)
		require.True(t, ok, "ordertest.Check: %v", err)
		for _, v := range ve.Violations {
			l.Violations = append(l.Violations, v.Rule+": "+v.Detail)
		}
	}
	return l
}

// requireClean fails unless every due order is closed once, compensated,
// nothing early, nothing doubled or dead-lettered, and the invariants hold.
func requireClean(t *testing.T, l ledger) {
	t.Helper()
	require.Empty(t, l.Violations, "invariants")
	require.Zero(t, l.Doubled, "doubled")
	require.Zero(t, l.Lost, "lost")
	require.Zero(t, l.Early, "closed early")
	require.Zero(t, l.DeadLetters, "dead letters")
	require.Equal(t, l.Due, l.Closed, "closed")
	require.Equal(t, l.Closed, l.Compensated, "compensated")
}

// requireNoHalfClose fails if the invariants do not hold (a half-done close
// or a double one) at an intermediate point; orders may still be open.
func requireNoHalfClose(t *testing.T, db *sqlx.DB, base *ordertest.Baseline, when string) ledger {
	t.Helper()
	l := measure(t, db, base, time.Time{})
	require.Empty(t, l.Violations, "invariants %s", when)
	require.Zero(t, l.Doubled, "doubled %s", when)
	require.Equal(t, l.Closed, l.Compensated, "compensated %s", when)
	return l
}

// ---------------------------------------------------------------------------
// Small helpers

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ---------------------------------------------------------------------------
// `executor serve` under a fake admin

const adminToken = "faults-token-0123456789"

// served is an `executor serve` child and the admin-side client that
// triggers it.
type served struct {
	*child
	address string // registryValue, http://127.0.0.1:port/
	port    int
	client  *xxljobtest.Client
}

// serveEnv adds the serve settings for admin and port to e.
func serveEnv(e env, admin *xxljobtest.Admin, port int) env {
	return e.with(
		"XXL_JOB_ADMIN_ADDRESSES", admin.URL,
		"XXL_JOB_ACCESS_TOKEN", adminToken,
		"XXL_JOB_EXECUTOR_PORT", strconv.Itoa(port),
		"XXL_JOB_EXECUTOR_BINDADDR", "127.0.0.1:"+strconv.Itoa(port),
		"XXL_JOB_EXECUTOR_ADDRESS", fmt.Sprintf("http://127.0.0.1:%d/", port),
	)
}

// serve starts `executor serve` with e (see serveEnv) and waits until it
// answers /beat.
func (h *harness) serve(t *testing.T, name string, e env) *served {
	t.Helper()
	port, err := strconv.Atoi(e["XXL_JOB_EXECUTOR_PORT"])
	require.NoError(t, err)
	s := &served{child: h.start(t, name, e, "serve"), port: port, address: e["XXL_JOB_EXECUTOR_ADDRESS"]}
	s.client = xxljobtest.NewClient(s.address, adminToken, xxljobtest.V24)
	t.Cleanup(s.client.Close)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		env, err := s.client.Beat(ctx)
		cancel()
		if err == nil && env.Code == 200 {
			return s
		}
		if s.exited() || time.Now().After(deadline) {
			t.Fatalf("%s did not come up (exit %d, err %v)\nstderr:\n%s", name, s.code, err, tail(s.stderr.String(), 30))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// trigger sends one /run of orderTimeoutCloseJob and requires it accepted.
func (s *served) trigger(t *testing.T, jobID int, logID int64, param string, shard, total int) xxljobtest.TriggerParam {
	t.Helper()
	p := xxljobtest.Trigger(jobID, "orderTimeoutCloseJob", logID)
	p.ExecutorParams, p.BroadcastIndex, p.BroadcastTotal = param, shard, total
	env, err := s.client.Run(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code, "trigger %d refused: %s", logID, env.MsgString())
	return p
}

// runLog returns a run's log as the admin UI would read it.
func (s *served) runLog(t *testing.T, p xxljobtest.TriggerParam) string {
	t.Helper()
	_, lr, err := s.client.Log(context.Background(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.NotNil(t, lr)
	return lr.LogContent
}

// stop ends the process gracefully (SIGTERM) and requires exit 0.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.signal(syscall.SIGTERM)
	code := s.wait(t, 30*time.Second)
	require.Equal(t, 0, code, "%s graceful stop; stderr:\n%s", s.name, tail(s.stderr.String(), 20))
}
