// Package redistest connects tests to a real Redis: the shared server named by
// TEST_REDIS_ADDR (default 127.0.0.1:6379) with a key prefix per test, so tests
// run in parallel without FLUSHDB, or a private redis-server process started
// for the test (for multi-node locks and for stopping Redis under a test).
//
// A server that does not answer fails the test.
package redistest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// Addr is the shared test server's address.
func Addr() string {
	return cmp.Or(os.Getenv("TEST_REDIS_ADDR"), "127.0.0.1:6379")
}

// Client returns a client of the shared server and a key prefix unique to t.
// Keys under the prefix are deleted when the test ends.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("redistest: Redis at %s does not answer (%v); start redis-server (see docs/development.md) or set TEST_REDIS_ADDR", Addr(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.Close()
	})
	return c, prefix
}

// Server is a private redis-server process.
type Server struct {
	Addr string
	port int
	dir  string
	cmd  *exec.Cmd
	t    testing.TB
}

// StartNodes starts n private servers, the independent nodes of a
// Redlock, and a client of each that neither retries nor waits long to
// dial, so that a test stopping a node sees the quorum change at once. The
// clients are closed when the test ends.
func StartNodes(t testing.TB, n int) ([]*Server, []redis.UniversalClient) {
	t.Helper()
	servers := make([]*Server, n)
	nodes := make([]redis.UniversalClient, n)
	for i := range n {
		servers[i] = StartServer(t)
		c := redis.NewClient(&redis.Options{Addr: servers[i].Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		nodes[i] = c
	}
	return servers, nodes
}

// StartServer starts a private redis-server on a free loopback port, with
// nothing kept on disk, and stops it when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redistest: redis-server not on PATH (apt-get install redis-server): %v", err)
	}
	s := &Server{port: freePort(t), dir: t.TempDir(), t: t}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the process on the same port.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		err := c.Ping(context.Background()).Err()
		c.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process (as a crash would) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// VerifyTestMain runs a package's tests and then goleak, for packages whose
// tests stop a Redis on purpose: go-redis's own log lines (dial failures)
// are dropped, and goleak ignores the goroutine in which go-redis redials
// after a failed dial, which sleeps a second between tries and only
// notices its pool was closed when it wakes.
func VerifyTestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
