package doclinks

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The README's test command checks its prerequisites before any slow step
// and, when it may not install what is missing or cannot reach a service,
// stops with one line naming the command to run. scripts/test.sh
// --check-prereqs runs here with a PATH of the machine's commands in which
// each prerequisite is a stub, minus the ones a case takes away.
func TestTestScriptStopsWithOneActionableLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scripts/test.sh five times")
	}
	script := filepath.Join("..", "..", "scripts", "test.sh")
	list, err := exec.Command("bash", script, "--list-prereqs").Output()
	require.NoError(t, err)
	var prereqs []string
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		prereqs = append(prereqs, strings.Fields(line)[0])
	}
	require.Contains(t, prereqs, "promtool")
	require.Contains(t, prereqs, "chromium")
	down := closedPort(t)

	for _, tc := range []struct {
		name    string
		without []string          // prerequisites taken off PATH
		env     map[string]string // beyond TEST_SH_NOT_ROOT=1
		failAPT bool              // run as root with an apt-get that fails
		want    string            // the one line on stderr; "" passes
	}{
		{name: "promtool missing", without: []string{"promtool"},
			want: "FATAL: missing promtool; as a user this script does not install packages: run  sudo apt-get install -y --no-install-recommends prometheus  then make test again"},
		{name: "three missing", without: []string{"promtool", "docker-compose", "redis-cli"},
			want: "FATAL: missing promtool, docker-compose, redis-cli; as a user this script does not install packages: run  sudo apt-get install -y --no-install-recommends prometheus docker-compose redis-tools  then make test again"},
		{name: "apt-get fails", without: []string{"faketime"}, failAPT: true,
			want: "FATAL: apt-get install -y --no-install-recommends faketime failed (its output: /"},
		{name: "services down", env: map[string]string{"TEST_REDIS_ADDR": "127.0.0.1:" + down, "TEST_RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:" + down + "/"},
			want: "FATAL: not answering: Redis at 127.0.0.1:" + down + " (TEST_REDIS_ADDR; start it: systemctl start redis-server); RabbitMQ at 127.0.0.1:" + down +
				" (TEST_RABBITMQ_URL; start it: systemctl start rabbitmq-server); without systemd, bash .ci/run starts the local ones, then runs make test"},
		{name: "all there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.failAPT && os.Geteuid() != 0 {
				t.Skip("the apt-get path is taken as root only")
			}
			stubs := map[string]string{}
			for _, p := range prereqs {
				stubs[p] = "exit 0"
			}
			for _, w := range tc.without {
				stubs[w] = ""
			}
			if tc.failAPT {
				stubs["apt-get"] = "echo 'E: Unable to locate package' >&2; exit 100"
			}
			bin := pathOfStubs(t, stubs)
			cmd := exec.Command("bash", script, "--check-prereqs")
			cmd.Env = append(os.Environ(), "PATH="+bin)
			if !tc.failAPT {
				cmd.Env = append(cmd.Env, "TEST_SH_NOT_ROOT=1")
			}
			for k, v := range tc.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			t.Logf("%s in %s\nstdout:\n%s\nstderr:\n%s", tc.name, time.Since(start), &stdout, &stderr)
			if tc.want == "" {
				require.NoError(t, err)
				require.Contains(t, stdout.String(), "prerequisites: ok")
				require.Empty(t, stderr.String())
				return
			}
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "exits non-zero: %v", err)
			require.Equal(t, 1, exit.ExitCode())
			line := strings.TrimSuffix(stderr.String(), "\n")
			require.NotContains(t, line, "\n", "one line")
			require.True(t, strings.HasPrefix(line, tc.want), "got  %s\nwant %s", line, tc.want)
			require.NotContains(t, stdout.String(), "prerequisites: ok")
		})
	}
}

// pathOfStubs makes a directory holding the machine's commands (links to
// those on PATH, the first of a name wins) where each command named in stubs
// is instead a shell script of that body, or absent when the body is empty.
// A stub is a new file, never written through a link to the real command.
func pathOfStubs(t *testing.T, stubs map[string]string) string {
	t.Helper()
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dst := filepath.Join(bin, e.Name())
			if _, stubbed := stubs[e.Name()]; stubbed || e.IsDir() {
				continue
			}
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			require.NoError(t, os.Symlink(filepath.Join(dir, e.Name()), dst))
		}
	}
	for name, body := range stubs {
		if body == "" {
			continue
		}
		f, err := os.OpenFile(filepath.Join(bin, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		require.NoError(t, err)
		_, err = f.WriteString("#!/bin/sh\n" + body + "\n")
		require.NoError(t, errors.Join(err, f.Close()))
	}
	return bin
}

// closedPort returns a loopback port nothing listened on a moment ago.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return strconv.Itoa(port)
}
