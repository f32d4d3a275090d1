package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// A bare `executor` prints the help and serves nothing.
func TestBareExecutorPrintsHelp(t *testing.T) {
	code, out, errOut := runCLI(t, nil)
	require.Equal(t, 2, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "want a command")
	require.Contains(t, errOut, "commands:")
	require.Contains(t, errOut, "serve")
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "version", "-json")
	require.Equal(t, 0, code, errOut)
	var b build
	require.NoError(t, json.Unmarshal([]byte(out), &b))
	require.NotEmpty(t, b.Version)
	require.NotEmpty(t, b.Commit)
	require.True(t, strings.HasPrefix(b.GoVersion, "go"), b.GoVersion)

	old := version
	version, commit = "9.9.9", "0123abc"
	t.Cleanup(func() { version, commit = old, "" })
	_, out, _ = runCLI(t, nil, "version")
	require.Contains(t, out, "executor 9.9.9\ncommit 0123abc")
}

func TestRunUnknownHandlerListsHandlers(t *testing.T) {
	code, _, errOut := runCLI(t, map[string]string{"MYSQL_DSN": "nobody@tcp(127.0.0.1:1)/none"}, "run", "nosuchJob")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown handler "nosuchJob"; the handlers are: deadLetterRetryJob, delayTaskSweepJob, demoJob, orderAutoConfirmJob, orderFulfillmentTimeoutJob, orderTimeoutCloseJob`)
	require.NotContains(t, errOut, "mysql", "refused before connecting anywhere")
}

// Against a database nobody migrated, the run fails saying what to do.
func TestMissingSchemaSaysMigrate(t *testing.T) {
	db := dbtest.NewEmpty(t)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(), "DELAY_KEY_PREFIX": prefix}
	code, out, errOut := runCLI(t, env, "run", "orderTimeoutCloseJob")
	require.Equal(t, 1, code, errOut)
	// The start-up schema check refuses before the job runs (serve refuses
	// to start the same way); a table lost while serve runs makes the run
	// log say it (orders' errors tests).
	require.Contains(t, errOut, "table order_info, table order_item")
	require.Contains(t, errOut, ": run executor migrate")
	require.NotContains(t, out, "xxl-job job execute start")

	code, _, errOut = runCLI(t, env, "deadletter", "list")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Error 1146")
	require.Contains(t, errOut, "run `executor migrate`")
}

// The first line of a run log shows the page size the run uses, not 0.
func TestRunLogShowsPageSizeInEffect(t *testing.T) {
	db := dbtest.New(t)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(), "DELAY_KEY_PREFIX": prefix}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "orderTimeoutCloseJob"}, "pageSize=500 "},
		{[]string{"run", "orderTimeoutCloseJob", "-param", "maxPerSecond=20"}, "pageSize=2 "},
		{[]string{"run", "deadLetterRetryJob"}, "pageSize=100 "},
		{[]string{"run", "orderAutoConfirmJob"}, "pageSize=500 "},
	} {
		code, out, errOut := runCLI(t, env, c.args...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, c.want, strings.Join(c.args, " "))
	}
}

// The acceptance files: a Java 3.x application.yml and a 2.4 one run
// demoJob; conflicting token keys stop the start naming both.
func TestJavaConfigFilesRunDemoJob(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	logs := filepath.Join(dir, "logs")
	java3 := write("java3.yml", `server:
  port: 8081
xxl:
  job:
    admin:
      addresses: http://127.0.0.1:8080/xxl-job-admin
      accessToken: default_token
      timeout: 3
    executor:
      enabled: true
      appname: xxl-job-executor-sample
      ip: 127.0.0.1
      port: 9999
      logpath: `+logs+`
      logretentiondays: 30
      excludedpackage: org.springframework,spring
`)
	java24 := write("java24.yml", `xxl:
  job:
    admin:
      addresses: http://127.0.0.1:8080/xxl-job-admin
    accessToken: default_token
    executor:
      appname: xxl-job-executor-sample
      address:
      ip:
      port: 9999
      logpath: `+logs+`
      logretentiondays: 30
`)
	for _, file := range []string{java3, java24} {
		code, out, errOut := runCLI(t, nil, "run", "demoJob", "-param", "0", "-config", file)
		require.Equal(t, 0, code, "%s: %s", file, errOut)
		require.Contains(t, out, "demoJob ran 0 second(s)")
		if file == java3 {
			require.Contains(t, errOut, "excludedpackage is ignored", "the notices are logged")
			require.Contains(t, errOut, "Spring Boot keys ignored")
		}
	}
	clash := write("clash.yml", "xxl:\n  job:\n    accessToken: a\n    admin:\n      accessToken: b\n")
	code, _, errOut := runCLI(t, nil, "run", "demoJob", "-param", "0", "-config", clash)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "xxl.job.accessToken (line 3) and xxl.job.admin.accessToken (line 5) are one setting")
}
