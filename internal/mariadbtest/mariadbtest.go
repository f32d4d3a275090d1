// Package mariadbtest starts a PRIVATE MariaDB server for a test: its own
// mariadbd process on a temporary data directory and a spare loopback port,
// which the test may stop, crash, restart, or run under a shifted clock. Tests
// that disturb a server use this; the shared server (internal/dbtest) must
// never be stopped, since other tests and engineers use it at the same time.
//
// The data directory is made by mariadb-install-db once per machine and
// server version (kept in the temp folder) and copied for every server
// (about 25 MB, well under a second). root has no password and reaches the
// server over TCP on 127.0.0.1.
//
// A missing mariadbd or mariadb-install-db fails the test: a silently
// skipped fault test looks green.
package mariadbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/sql/migrations"
)

// Binaries, overridable for machines that keep them elsewhere.
var (
	MariadbdPath  = firstExisting("/usr/sbin/mariadbd", "mariadbd")
	InstallDBPath = firstExisting("/usr/bin/mariadb-install-db", "mariadb-install-db")
)

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if lp, err := exec.LookPath(p); err == nil {
			return lp
		}
	}
	return paths[len(paths)-1]
}

// Options configure a private server.
type Options struct {
	// Env is added to the server's environment, e.g. libfaketime's
	// LD_PRELOAD and FAKETIME to run the server on a shifted clock. It can be
	// changed between Stop and Start with SetEnv.
	Env []string
	// Args are extra mariadbd options, e.g. --server-id and --log-bin for a
	// replication primary (see replication.go); without --log-bin the
	// server runs with --skip-log-bin.
	Args []string
	// StartTimeout bounds each start, crash recovery included. Default 60s.
	StartTimeout time.Duration
}

// Server is a private mariadbd process.
type Server struct {
	// Addr is host:port of the server (127.0.0.1 and a spare port).
	Addr string
	// Port is the TCP port; it stays the same across restarts.
	Port int
	// Dir holds the data directory, the socket and the error log.
	Dir string

	t    testing.TB
	opts Options // guarded by mu

	process
	starts int
}

// Start makes a data directory and starts the server; the server is killed
// and its files removed when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	tmpl, err := template()
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", tmpl, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("mariadbtest: copy the template data directory: %v: %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	s := &Server{Port: freePort(t), Dir: dir, t: t, opts: opts}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

var (
	tmplOnce sync.Once
	tmplDir  string
	tmplErr  error
)

// template returns a data directory made by mariadb-install-db, shared by
// every test binary on the machine: it lives in the temp folder under a name
// made of the server's version and the install options, appears there by an
// atomic rename once complete, and is only ever copied from. So it is built
// once per machine and server version, and nothing piles up in /tmp.
func template() (string, error) {
	tmplOnce.Do(func() {
		for _, p := range []string{MariadbdPath, InstallDBPath} {
			if _, err := exec.LookPath(p); err != nil {
				tmplErr = fmt.Errorf("%s not found (apt-get install mariadb-server): %w", p, err)
				return
			}
		}
		version, err := exec.Command(MariadbdPath, "--version").Output()
		if err != nil {
			tmplErr = fmt.Errorf("%s --version: %w", MariadbdPath, err)
			return
		}
		installArgs := []string{"--no-defaults", "--user=root", "--auth-root-authentication-method=normal",
			"--skip-test-db", "--innodb-log-file-size=8M", "--innodb-buffer-pool-size=16M"}
		sum := sha256.Sum256([]byte(string(version) + strings.Join(installArgs, " ")))
		final := filepath.Join(os.TempDir(), "mariadbtest-template-"+hex.EncodeToString(sum[:6]))
		tmplDir = filepath.Join(final, "data")
		if _, err := os.Stat(tmplDir); err == nil {
			return
		}
		work, err := os.MkdirTemp("", "mariadbtest-template-build-")
		if err != nil {
			tmplErr = err
			return
		}
		defer os.RemoveAll(work) // a no-op after a successful rename
		// Not in installArgs, which name the template: the bootstrap
		// server, too, deletes the #sql files of its tmpdir (serverArgs).
		if err := os.Mkdir(filepath.Join(work, "tmp"), 0o755); err != nil {
			tmplErr = err
			return
		}
		cmd := exec.Command(InstallDBPath, append(installArgs, "--datadir="+filepath.Join(work, "data"),
			"--tmpdir="+filepath.Join(work, "tmp"))...)
		if out, err := cmd.CombinedOutput(); err != nil {
			tmplErr = fmt.Errorf("mariadb-install-db: %w: %s", err, out)
			return
		}
		if err := os.Rename(work, final); err != nil {
			if _, serr := os.Stat(tmplDir); serr != nil { // not another process's template either
				tmplErr = fmt.Errorf("publish the template data directory: %w", err)
			}
		}
	})
	return tmplDir, tmplErr
}

// SetEnv replaces Options.Env for the next Start.
func (s *Server) SetEnv(env []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Env = env
}

// Start starts the server on its data directory and port and waits until it
// accepts connections (after crash recovery). It does nothing if the server
// runs.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return
	}
	s.starts++
	args := append(serverArgs(s.Dir, s.Port),
		"--user=root",
		"--innodb-flush-log-at-trx-commit=1", // a crash keeps every commit
	)
	if !hasOption(s.opts.Args, "--log-bin") {
		args = append(args, "--skip-log-bin")
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(MariadbdPath, args...)
	cmd.Env = append(os.Environ(), s.opts.Env...)
	exited, err := s.launch(cmd, nil)
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("mariadbtest: start mariadbd: %v", err)
	}

	if err := s.waitReady(exited); err != nil {
		s.Kill()
		s.t.Fatalf("mariadbtest: server on %s did not start: %v\nerror log:\n%s", s.Addr, err, s.ErrorLog())
	}
}

// hasOption reports whether args hold the option name, alone or with a value.
func hasOption(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func (s *Server) waitReady(exited <-chan struct{}) error {
	return waitUntil(exited, s.opts.StartTimeout, func() error {
		db, err := sqlx.Open("mysql", s.DSN(""))
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
}

// waitUntil calls check every 50 ms until it returns nil, the process
// exits (exited closes) or timeout passes.
func waitUntil(exited <-chan struct{}, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("mariadbd exited")
		default:
		}
		if last = check(); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("timeout after %s: %w", timeout, last)
}

// Kill crashes the server (SIGKILL, as a power cut or the OOM killer would)
// and waits until it is gone. InnoDB recovers at the next Start.
func (s *Server) Kill() { s.stop(syscall.SIGKILL, 10*time.Second) }

// Stop shuts the server down cleanly (SIGTERM) and waits until it is gone.
func (s *Server) Stop() { s.stop(syscall.SIGTERM, 60*time.Second) }

// Restart stops the server (cleanly, or as a crash if crash is true) and
// starts it again on the same data directory and port.
func (s *Server) Restart(crash bool) {
	s.t.Helper()
	if crash {
		s.Kill()
	} else {
		s.Stop()
	}
	s.Start()
}

// Running reports whether the process runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// ErrorLog returns the server's error log.
func (s *Server) ErrorLog() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "error.log"))
	return string(b)
}

// DSN returns a go-sql-driver DSN for database db ("" for none) as root,
// with parseTime, loc=UTC and interpolateParams, as the executor uses.
func (s *Server) DSN(db string) string { return dsnFor(s.Addr, db) }

func dsnFor(addr, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.Timeout = 2 * time.Second
	return cfg.FormatDSN()
}

// NewDB creates database name with the executor's migrations applied and
// returns a handle to it (closed when the test ends) and its DSN.
func (s *Server) NewDB(t testing.TB, name string) (*sqlx.DB, string) {
	t.Helper()
	dsn := s.DSN(name)
	return newDB(t, 30*time.Second, s.DSN(""), name, []string{dsn})[0], dsn
}

// newDB creates database name through adminDSN, opens it at each of dsns
// (the handles closed when the test ends) and applies the executor's
// migrations through the first, all within timeout.
func newDB(t testing.TB, timeout time.Duration, adminDSN, name string, dsns []string) []*sqlx.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	admin, err := sqlx.Open("mysql", adminDSN)
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("mariadbtest: create database %s: %v", name, err)
	}
	var dbs []*sqlx.DB
	for _, dsn := range dsns {
		db, err := sqlx.Open("mysql", dsn)
		if err != nil {
			t.Fatalf("mariadbtest: open %s: %v", name, err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	if _, err := migrations.Apply(ctx, dbs[0].DB); err != nil {
		t.Fatalf("mariadbtest: migrate %s: %v", name, err)
	}
	return dbs
}

// Private servers listen on ports below Linux's default ephemeral range
// (32768-60999): a port the kernel hands out for "port 0" is also one it
// may give any outgoing connection as its local port in the moment before
// mariadbd binds it, and with many tests connecting that happened (a
// Galera node takes four ports). Ports handed out are remembered, so one
// test binary never gives the same port twice, even once it is free again.
const (
	portLow, portHigh = 20000, 32768
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// freePort returns a port on 127.0.0.1 that nothing listens on now and
// this process has not handed out before.
func freePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := portLow + rand.IntN(portHigh-portLow)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatalf("mariadbtest: no free port in [%d, %d) after 1000 tries", portLow, portHigh)
	return 0
}
