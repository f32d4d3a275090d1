package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
)

// delayProfile is what -profile prints after a run: how the dispatchers
// formed their batches (seen by the batch handler), the server-side
// statement and commit counts (SHOW GLOBAL STATUS deltas: the whole
// server's, so other clients' work shows too), the Redis commands
// (INFO commandstats deltas, likewise) and the CPU time of this process
// (the dispatchers, the registering client and the bench), mariadbd and
// redis-server over the run.
type delayProfile struct {
	db     *sqlx.DB
	rdb    *redis.Client
	dbName string // the run's database, for performance_schema's digests

	mu      sync.Mutex
	batches []int // tasks per batch handler call

	start        time.Time
	status0      map[string]int64
	redis0       map[string]int64
	self0        time.Duration
	mariadb0     time.Duration
	redisCPU0    time.Duration
	mariadbPID   int
	redisSrvPID  int
	statusErr    error
	redisStatErr error
}

// profileStatus are the server counters -profile reports, per task.
var profileStatus = []string{"Questions", "Com_select", "Com_update", "Com_insert", "Com_delete", "Com_begin",
	"Com_commit", "Com_rollback", "Handler_commit", "Innodb_os_log_fsyncs", "Innodb_row_lock_waits",
	"Innodb_row_lock_time", "Innodb_rows_updated", "Innodb_rows_read", "Innodb_os_log_written", "Innodb_buffer_pool_write_requests"}

func newDelayProfile(db *sqlx.DB, rdb *redis.Client, dbName string) *delayProfile {
	return &delayProfile{db: db, rdb: rdb, dbName: dbName}
}

func (p *delayProfile) batch(n int) {
	p.mu.Lock()
	p.batches = append(p.batches, n)
	p.mu.Unlock()
}

// begin takes the first reading (at the first due time).
func (p *delayProfile) begin(ctx context.Context) {
	p.start = time.Now()
	p.status0, p.statusErr = globalStatus(ctx, p.db)
	p.redis0, p.redisStatErr = redisCommandStats(ctx, p.rdb)
	p.self0 = selfCPU()
	var pidFile string
	if err := p.db.GetContext(ctx, &pidFile, `SELECT @@pid_file`); err == nil {
		if b, err := os.ReadFile(pidFile); err == nil {
			p.mariadbPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	p.redisSrvPID = redisPID(ctx, p.rdb)
	p.mariadb0, p.redisCPU0 = procCPU(p.mariadbPID), procCPU(p.redisSrvPID)
}

// print takes the second reading and prints the differences, per task of
// the n the run handled.
func (p *delayProfile) print(ctx context.Context, w io.Writer, n int) {
	wall := time.Since(p.start)
	status1, err1 := globalStatus(ctx, p.db)
	redis1, err2 := redisCommandStats(ctx, p.rdb)
	self := selfCPU() - p.self0
	mdb, rsrv := procCPU(p.mariadbPID)-p.mariadb0, procCPU(p.redisSrvPID)-p.redisCPU0
	per := func(v int64) float64 { return float64(v) / float64(max(n, 1)) }

	p.mu.Lock()
	b := slices.Clone(p.batches)
	p.mu.Unlock()
	slices.Sort(b)
	if len(b) > 0 {
		total := 0
		for _, x := range b {
			total += x
		}
		fmt.Fprintf(w, "profile: %d batch handler calls, tasks per call mean %.1f p10 %d p50 %d p90 %d max %d\n",
			len(b), float64(total)/float64(len(b)), b[len(b)/10], b[len(b)/2], b[len(b)*9/10], b[len(b)-1])
	}
	fmt.Fprintf(w, "profile: CPU over %.1fs wall: bench process (dispatchers, client, bench) %.1fs (%.0f%% of a core), mariadbd %.1fs (%.0f%%), redis-server %.1fs (%.0f%%); load average %s\n",
		wall.Seconds(), self.Seconds(), 100*self.Seconds()/wall.Seconds(), mdb.Seconds(), 100*mdb.Seconds()/wall.Seconds(),
		rsrv.Seconds(), 100*rsrv.Seconds()/wall.Seconds(), loadAverage())
	if p.statusErr == nil && err1 == nil {
		var parts []string
		for _, k := range profileStatus {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per(status1[k]-p.status0[k])))
		}
		fmt.Fprintf(w, "profile: server per task (global, other clients included): %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(w, "profile: server status: %v %v\n", p.statusErr, err1)
	}
	p.statements(ctx, w, n, len(b))
	if p.redisStatErr == nil && err2 == nil {
		var parts []string
		keys := make([]string, 0, len(redis1))
		for k := range redis1 {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if d := redis1[k] - p.redis0[k]; d > 0 {
				parts = append(parts, fmt.Sprintf("%s %.2f", k, per(d)))
			}
		}
		fmt.Fprintf(w, "profile: Redis calls per task (global): %s\n", strings.Join(parts, ", "))
	}
}

func globalStatus(ctx context.Context, db *sqlx.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, rows.Err()
}

func redisCommandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		if n, err := strconv.ParseInt(calls, 10, 64); err == nil {
			out[name] = n
		}
	}
	return out, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisPID is the Redis server's process id (INFO server).
func redisPID(ctx context.Context, rdb *redis.Client) int {
	s, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ := strconv.Atoi(v)
			return pid
		}
	}
	return 0
}

// procCPU is a process's user and system time (/proc/pid/stat, clock
// ticks of 1/100 s); 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// statements prints, when performance_schema is on, the run database's
// statements by shape (registration included): per task and per batch
// handler call, mean time and share of the server's time.
func (p *delayProfile) statements(ctx context.Context, w io.Writer, n, batches int) {
	all, total, err := statementShapes(ctx, p.db, p.dbName)
	if err != nil {
		fmt.Fprintf(w, "profile: (no statement digests: %v)\n", err)
		return
	}
	fmt.Fprintf(w, "profile: server time in the run's database %.0f ms (registration included):\n", float64(total)/1e9)
	fmt.Fprintf(w, "  %9s %7s %7s %8s %6s  %s\n", "count", "/task", "/batch", "mean ms", "share", "statement")
	for _, s := range all {
		if float64(s.wait) < 0.005*float64(total) {
			continue
		}
		text := strings.Join(strings.Fields(s.text), " ")
		if len(text) > 100 {
			text = text[:100] + "…"
		}
		fmt.Fprintf(w, "  %9d %7.3f %7.2f %8.3f %5.1f%%  %s\n", s.n, float64(s.n)/float64(max(n, 1)),
			float64(s.n)/float64(max(batches, 1)), float64(s.wait)/float64(s.n)/1e9, 100*float64(s.wait)/float64(total), text)
	}
}
