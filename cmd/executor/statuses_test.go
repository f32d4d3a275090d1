package main

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Statuses: any case in, lower case out, for tasks as for dead letters;
// an empty list says so in one line.
func TestCLIStatusCaseAndEmptyLists(t *testing.T) {
	_, env := tasksWorld(t)
	for _, status := range []string{"failed", "FAILED", "Failed"} {
		code, out, errOut := runCLI(t, env, "tasks", "list", "-status", status)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, `t-failed\s+orderTimeoutClose\s+failed\s`, out, status)
		require.NotContains(t, out, "FAILED")
	}
	code, out, errOut := runCLI(t, env, "tasks", "stats")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^pending\s+2$`, out)
	require.NotRegexp(t, `PENDING|RUNNING|FAILED|CANCELLED|DONE`, out)
	code, out, _ = runCLI(t, env, "tasks", "list", "-status", "cancelled")
	require.Equal(t, 0, code)
	require.Equal(t, "no tasks match\n", out)

	for _, status := range []string{"parked", "PARKED"} {
		code, out, errOut = runCLI(t, env, "deadletter", "list", "-status", status)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "no dead letters match\n", out, status)
	}
	for _, args := range [][]string{{"outbox", "list", "-status", "Parked"}, {"refunds", "list", "-status", "OWED"}} {
		code, out, errOut = runCLI(t, env, args...)
		require.Equal(t, 0, code, errOut)
		require.True(t, strings.HasPrefix(out, "no ") && strings.HasSuffix(out, " match\n") && strings.Count(out, "\n") == 1, "%v: %q", args, out)
	}
}

// With Redis down, a tasks verb prints what it has to say and none of
// go-redis's own logging, which would go to the process's stderr (fd 2)
// whatever the command's streams are: the test watches fd 2 itself.
func TestTasksWithRedisDownPrintsNoClientLogging(t *testing.T) {
	_, env := tasksWorld(t)
	env["REDIS_ADDR"] = "127.0.0.1:1"
	var code int
	var out, errOut string
	fd2 := captureFD2(t, func() { code, out, errOut = runCLI(t, env, "tasks", "requeue", "t-failed") })
	require.Equal(t, 0, code, errOut) // the reconciler tells the timer later
	require.Regexp(t, `status\s+pending`, out)
	require.Empty(t, fd2, "nothing written to the process's stderr behind the command's back")
	require.NotContains(t, errOut, "pool.go")
	require.LessOrEqual(t, strings.Count(errOut, "\n"), 2, errOut)
}

// captureFD2 runs f with file descriptor 2 pointing at a file and returns
// what was written there.
func captureFD2(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "fd2")
	require.NoError(t, err)
	defer tmp.Close()
	saved, err := syscall.Dup(2)
	require.NoError(t, err)
	require.NoError(t, syscall.Dup3(int(tmp.Fd()), 2, 0))
	func() {
		defer func() {
			_ = syscall.Dup3(saved, 2, 0)
			_ = syscall.Close(saved)
		}()
		f()
	}()
	b, err := os.ReadFile(tmp.Name())
	require.NoError(t, err)
	return string(b)
}

// An error is printed with one prefix, even when it names the command
// itself.
func TestErrorPrefixedOnce(t *testing.T) {
	path := []*command{{name: "provision"}}
	require.Equal(t, "no console password", errorText(path, errString("provision: no console password")))
	require.Equal(t, "orders: x", errorText(path, errString("orders: x")))
}

type errString string

func (e errString) Error() string { return string(e) }
