package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// What a hostile command line gets: bad usage exits 2 with a line naming
// the flag or argument at fault, a failure exits 1 saying what failed, and
// neither echoes a secret.

// healthcheck names the URL it probed with its password masked, in every
// line, and refuses what is not an http(s) URL as bad usage.
func TestHealthcheckMasksTheURLsPassword(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	withPassword := strings.Replace(failing.URL, "http://", "http://probe:Hunter2secret@", 1)
	closed := "http://probe:Hunter2secret@127.0.0.1:1/healthz"

	for _, tc := range []struct {
		url  string
		code int
		want string
	}{
		{withPassword + "/healthz", 1, "probe http://probe:xxxxx@" + strings.TrimPrefix(failing.URL, "http://") + "/healthz: HTTP 503"},
		{closed, 1, "probe http://probe:xxxxx@127.0.0.1:1/healthz: dial tcp 127.0.0.1:1: "},
		{"http://probe:Hunter2secret@[::1", 2, "-url is not a URL: missing ']' in host"},
		{"ftp://probe:Hunter2secret@127.0.0.1/", 2, "-url ftp://probe:xxxxx@127.0.0.1/: want an http:// or https:// URL"},
		{"/healthz", 2, "-url /healthz: want an http:// or https:// URL"},
	} {
		code, out, errOut := runCLI(t, nil, "healthcheck", "-url", tc.url)
		require.Equal(t, tc.code, code, "%s: %s", tc.url, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want, tc.url)
		require.NotContains(t, errOut, "Hunter2secret", tc.url)
		require.NotContains(t, errOut, `Get "`, "the URL is named once")
	}
}

// A server that accepts the probe and never answers: the probe gives up
// after healthcheckTimeout and says so, not "context deadline exceeded".
func TestHealthcheckSaysWhenNoAnswerCame(t *testing.T) {
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer silent.Close()
	defer close(release)
	code, _, errOut := runCLI(t, nil, "healthcheck", "-url", silent.URL+"/healthz")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "executor healthcheck: probe "+silent.URL+"/healthz: no answer within 3s")
}

// demo-data refuses, before it connects, numbers it cannot honour: NaN
// fractions (which compare false to every bound and made 5000 orders of
// nonsense shares), a -skus that would write billions of stock rows, and
// -reset-database without the -reset it confirms.
func TestDemoDataRefusesHostileNumbers(t *testing.T) {
	env := map[string]string{"MYSQL_DSN": "nobody@tcp(127.0.0.1:1)/none"}
	const fractions = "-due, -paid and -coupons are fractions from 0 to 1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-due", "NaN"}, fractions},
		{[]string{"-paid", "nan"}, fractions},
		{[]string{"-coupons", "NaN"}, fractions},
		{[]string{"-skus", "2000000000"}, "-skus 2000000000: want 1 to 10000000"},
		{[]string{"-skus", "0"}, "-skus 0: want 1 to 10000000"},
		{[]string{"-reset-database", "shop"}, "-reset-database confirms -reset, which is not given"},
	} {
		args := append([]string{"demo-data"}, tc.args...)
		code, out, errOut := runCLI(t, env, args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, "executor demo-data: "+tc.want, tc.args)
		require.NotContains(t, errOut, "mysql", "refused before connecting")
	}
}

// outbox and refunds lists check -limit as the other lists do (-limit 0
// listed nothing and exited 0), and a filter the view refuses names the
// flag typed (-type, -order), not the view's field (-eventType, -orderNo),
// in requeue -all too (exit 1 before).
func TestOutboxAndRefundsFiltersNameTheirFlags(t *testing.T) {
	db := dbtest.New(t)
	env := map[string]string{"MYSQL_DSN": db.DSN}
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"outbox", "list", "-limit", "0"}, "executor outbox list: -limit 0 is not in 1..1000"},
		{[]string{"refunds", "list", "-limit", "0"}, "executor refunds list: -limit 0 is not in 1..1000"},
		{[]string{"outbox", "list", "-type", "é"}, `executor outbox list: -type: eventType "é" is not printable ASCII`},
		{[]string{"outbox", "list", "-order", long}, "executor outbox list: -order: order number must be at most 64 bytes"},
		{[]string{"refunds", "list", "-order", long}, "executor refunds list: -order: order number must be at most 64 bytes"},
		{[]string{"outbox", "requeue", "-all", "-type", "é"}, `executor outbox requeue: -type: eventType "é" is not printable ASCII`},
		{[]string{"outbox", "requeue", "-all", "-type", long}, "executor outbox requeue: -type: event type is 65 bytes, at most 32"},
	} {
		code, out, errOut := runCLI(t, env, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want+"\nusage: ", tc.args)
	}
}

// deadletter show and requeue take -stage "" as the close stage, as the
// view does, and say so ("no  dead letter for order" before).
func TestDeadLetterEmptyStageIsTheCloseStage(t *testing.T) {
	db := dbtest.New(t)
	for _, verb := range []string{"show", "requeue"} {
		code, _, errOut := runCLI(t, map[string]string{"MYSQL_DSN": db.DSN}, "deadletter", verb, "O-404", "-stage", "")
		require.Equal(t, 1, code)
		require.Equal(t, "executor deadletter "+verb+": no close dead letter for order \"O-404\"\n", errOut)
	}
}

// tasks show, requeue and cancel refuse a BIZUUID no task can have as bad
// usage, without echoing a long one whole (it was "no task with bizUuid"
// and 100 KB, exit 1); purge refuses a negative -retention (it was taken
// for the default, silently).
func TestTasksRefuseImpossibleBizUUIDs(t *testing.T) {
	_, env := tasksWorld(t)
	long := strings.Repeat("x", 100_000)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "show", ""}, "executor tasks show: BIZUUID is empty"},
		{[]string{"tasks", "cancel", ""}, "executor tasks cancel: BIZUUID is empty"},
		{[]string{"tasks", "show", long}, "executor tasks show: BIZUUID is 100000 bytes, at most 128"},
		{[]string{"tasks", "requeue", long}, "executor tasks requeue: BIZUUID is 100000 bytes, at most 128"},
		{[]string{"tasks", "show", "é😀"}, `executor tasks show: BIZUUID "é😀" is not printable ASCII`},
		{[]string{"tasks", "purge", "-retention", "-1h"}, "executor tasks purge: -retention -1h0m0s is negative"},
	} {
		code, out, errOut := runCLI(t, env, tc.args...)
		require.Equal(t, 2, code, "%.40v: %.200s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want+"\nusage: ", "%.40v", tc.args)
		require.Less(t, len(errOut), 300, "%.40v", tc.args)
	}
	code, out, errOut := runCLI(t, env, "tasks", "show", "t-done")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `status\s+done`, out)
}

// An argument pasted by mistake (a file's 100 KB) comes back cut, in
// every one-line error that quotes it: unknown commands, unexpected
// arguments, handlers, shells, IDs, -shard.
func TestLongArgumentsAreCutInErrors(t *testing.T) {
	env := map[string]string{"MYSQL_DSN": "nobody@tcp(127.0.0.1:1)/none"}
	long := strings.Repeat("x", 100_000)
	cut := `"` + strings.Repeat("x", 64) + `"… (100000 bytes)`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{long}, "executor: unknown command " + cut},
		{[]string{"deadletter", long}, "executor deadletter: unknown subcommand " + cut},
		{[]string{"serve", long}, "executor serve: unexpected argument " + cut},
		{[]string{"run", long}, "executor run: unknown handler " + cut + "; the handlers are: "},
		{[]string{"run", "demoJob", "-shard", long}, "executor run: -shard " + cut + ": want I/N"},
		{[]string{"completion", long}, "executor completion: shell " + cut + ": only bash is supported"},
		{[]string{"outbox", "show", long}, "executor outbox show: ID " + cut + " is not a positive integer"},
		// Values the flag package and the views quote back.
		{[]string{"deadletter", "list", "-limit", long}, "executor deadletter list: invalid value " + cut + " for flag -limit: parse error"},
		{[]string{"deadletter", "list", "-status", long}, "executor deadletter list: -status " + cut + " is not waiting, parked or resolved"},
		{[]string{"tasks", "list", "-status", long}, "executor tasks list: -status " + cut + " is not pending, running"},
		{[]string{"deadletter", "requeue", "-status", "parked", "-since", long}, "executor deadletter requeue: -since " + cut + " is neither a time"},
	} {
		code, out, errOut := runCLI(t, env, tc.args...)
		require.Equal(t, 2, code, "%.40v: %.300s", tc.args, errOut)
		require.Empty(t, out)
		require.Less(t, len(errOut), 400, "%.40v: %.300s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%.40v", tc.args)
	}
	// A multi-byte character is never cut in two.
	_, _, errOut := runCLI(t, env, "run", strings.Repeat("é", 40_000))
	require.Contains(t, errOut, `unknown handler "`+strings.Repeat("é", 32)+`"… (80000 bytes)`)

	// A near miss of a handler gets a guess.
	_, _, errOut = runCLI(t, env, "run", "demojob")
	require.Contains(t, errOut, `; did you mean "demoJob"?`)
}

// -config and -jobs name a file of a few KB: a device that never ends
// (/dev/zero read until the process died out of memory) or anything over
// 4 MiB is refused, and a FIFO no one writes to gives way to SIGINT or
// SIGTERM (the command's context) instead of holding the command until
// SIGKILL.
func TestConfigAndJobsFilesThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yml")
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, maxInputFile+1))
	env := map[string]string{"MYSQL_DSN": "nobody@tcp(127.0.0.1:1)/none", "XXL_JOB_ADMIN_ADDRESSES": "http://127.0.0.1:1",
		"XXL_JOB_ACCESS_TOKEN": "hostile-token-0123456789"}

	code, _, errOut := runCLI(t, env, "-config", big, "deadletter", "list")
	require.Equal(t, 1, code)
	require.Equal(t, "executor deadletter list: config: "+big+" is over 4 MiB: not a settings file\n", errOut)
	code, _, errOut = runCLI(t, env, "provision", "-dry-run", "-jobs", big)
	require.Equal(t, 1, code)
	require.Equal(t, "executor provision: jobs file: "+big+" is over 4 MiB: not a settings file\n", errOut)
	code, _, errOut = runCLI(t, env, "-config", dir, "deadletter", "list")
	require.Equal(t, 1, code)
	require.Equal(t, "executor deadletter list: config: read "+dir+": is a directory\n", errOut, "the path named once")

	for i, args := range [][]string{{"-config", "FIFO", "deadletter", "list"}, {"provision", "-jobs", "FIFO"}} {
		// A FIFO each: a writer pairs with whichever reader has the FIFO
		// open, so a shared one could end the first read and not the second.
		fifo := filepath.Join(dir, fmt.Sprintf("fifo%d", i))
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
		args[slices.Index(args, "FIFO")] = fifo
		for k, v := range env {
			t.Setenv(k, v)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // as SIGTERM does
		done := make(chan int, 1)
		var errb bytes.Buffer
		go func() { done <- run(ctx, args, io.Discard, &errb) }()
		select {
		case code := <-done:
			require.Equal(t, 1, code, args)
			require.Contains(t, errb.String(), "read "+fifo+": gave up waiting for its content (context canceled)")
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: still reading the FIFO after its context was cancelled", args)
		}
		// A writer that opens and closes the FIFO ends the read left behind.
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
}

// demoJob's refusal of a param is the run's one-line result: a 100 KB
// param is cut in it, not repeated whole.
func TestDemoJobCutsALongParamInItsRefusal(t *testing.T) {
	env := map[string]string{"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}
	code, _, errOut := runCLI(t, env, "run", "demoJob", "-param", strings.Repeat("a", 100_000))
	require.Equal(t, 1, code)
	require.Less(t, len(errOut), 1000, "%.300s", errOut)
	require.Contains(t, errOut, `ended with code 500: demoJob param "`+strings.Repeat("a", 40)+`"… (100000 bytes): want a whole number of seconds`)
}
