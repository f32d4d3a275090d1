package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runCLI runs the binary's entry point in-process with the given environment.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunDemoJob(t *testing.T) {
	logs := t.TempDir()
	code, out, errOut := runCLI(t, map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": logs}, "run", "demoJob", "-param", "2")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "xxl-job job execute start")
	require.Contains(t, out, "demoJob second 1 of 2")
	require.Contains(t, out, "demoJob second 2 of 2")
	require.Contains(t, out, "demoJob ran 2 second(s)")

	// Flags before the handler work too, and a failing run exits 1.
	code, out, errOut = runCLI(t, map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": logs}, "run", "-param", "fail", "demoJob")
	require.Equal(t, 1, code)
	require.Contains(t, out, "demoJob failed on purpose")
	require.Contains(t, errOut, "ended with code 500")

	code, out, _ = runCLI(t, map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": logs}, "run", "demoJob", "-param", "panic")
	require.Equal(t, 1, code)
	require.Contains(t, out, "panicked on purpose")
	require.Contains(t, out, "goroutine", "the stack is in the run log")
}

func TestRunRejectsBadInput(t *testing.T) {
	logs := t.TempDir()
	env := map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": logs}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "want exactly one HANDLER"},
		{[]string{"run", "demoJob", "-shard", "2/2"}, "need 0 <= I < N"},
		{[]string{"run", "demoJob", "-shard", "x"}, "want I/N"},
		{[]string{"run", "demoJob", "-shard", "1/99999999999"}, `-shard "1/99999999999": N is at most 2147483647`},
		{[]string{"run", "demoJob", "-bogus"}, "flag provided but not defined"},
		{[]string{"nosuchcommand"}, `unknown command "nosuchcommand"`},
	} {
		code, _, errOut := runCLI(t, env, tc.args...)
		require.Equal(t, 2, code, strings.Join(tc.args, " "))
		require.Contains(t, errOut, tc.want)
	}
	code, _, errOut := runCLI(t, map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": logs, "XXL_JOB_EXECUTOR_PORT": "0"}, "run", "demoJob")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "xxl.job.executor.port")
}

func TestHelpListsCommands(t *testing.T) {
	code, out, _ := runCLI(t, nil, "help")
	require.Equal(t, 0, code)
	for _, c := range []string{"serve", "run", "migrate", "demo-data", "healthcheck"} {
		require.Contains(t, out, c)
	}
}
