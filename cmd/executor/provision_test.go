package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/handlers"
	"github.com/orderjob/executor/internal/fakeconsole"
	"github.com/orderjob/executor/internal/provision"
)

const provisionPassword = "cli-Secret-9z"

// provisionCLI points the environment at a fresh fake admin and returns a
// function running the CLI in-process.
func provisionCLI(t *testing.T, v fakeconsole.Version) (*fakeconsole.Console, func(args ...string) (int, string, string)) {
	t.Helper()
	fake := fakeconsole.New(t, fakeconsole.Options{Version: v, Username: "provisioner", Password: provisionPassword})
	for k, val := range map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":  fake.URL(),
		"XXL_JOB_ADMIN_USERNAME":   "provisioner",
		"XXL_JOB_ADMIN_PASSWORD":   provisionPassword,
		"XXL_JOB_ADMIN_VERSION":    "auto",
		"XXL_JOB_ADMIN_JOBSFILE":   filepath.Join("..", "..", "config", "jobs.yml"),
		"XXL_JOB_EXECUTOR_APPNAME": "order-job-executor",
		"LOG_LEVEL":                "debug",
		"LOG_FORMAT":               "text",
	} {
		t.Setenv(k, val)
	}
	return fake, func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(t.Context(), args, &out, &errb)
		return code, out.String(), errb.String()
	}
}

func requireNoSecrets(t *testing.T, fake *fakeconsole.Console, texts ...string) {
	t.Helper()
	for _, s := range fake.Secrets() {
		for _, txt := range texts {
			require.NotContains(t, txt, s, "a secret leaked")
		}
	}
}

func TestProvisionCommand(t *testing.T) {
	for _, v := range []fakeconsole.Version{fakeconsole.V24, fakeconsole.V34} {
		t.Run(string(v), func(t *testing.T) {
			fake, cli := provisionCLI(t, v)

			code, out, errOut := cli("provision", "-dry-run")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "group order-job-executor: create")
			require.Contains(t, out, "dry run, nothing changed: would create 6")
			require.Empty(t, fake.Writes())

			code, out2, errOut2 := cli("provision", "-prune")
			require.Equal(t, 0, code, errOut2)
			require.Contains(t, out2, "done: 6 created, 0 updated, 3 started, 0 stopped, 0 unchanged")
			require.Contains(t, errOut2, "logged into the admin")
			require.Len(t, fake.Jobs(), 6)

			writes := len(fake.Writes())
			code, out3, errOut3 := cli("provision")
			require.Equal(t, 0, code, errOut3)
			require.Contains(t, out3, "nothing to do: 6 jobs unchanged")
			require.Len(t, fake.Writes(), writes)

			requireNoSecrets(t, fake, out, errOut, out2, errOut2, out3, errOut3)
		})
	}
}

func TestProvisionCommandBadInput(t *testing.T) {
	_, cli := provisionCLI(t, fakeconsole.V24)
	code, _, errOut := cli("provision", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)

	code, _, errOut = cli("provision", "-bogus")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "flag provided but not defined")

	code, _, errOut = cli("provision", "-jobs", filepath.Join(t.TempDir(), "missing.yml"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "jobs file: open ")

	t.Setenv("XXL_JOB_ADMIN_PASSWORD", "")
	code, _, errOut = cli("provision")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no console password")
	require.True(t, strings.HasPrefix(errOut, "executor provision: "), errOut)
	require.NotContains(t, errOut, "provision: provision:", "one prefix")

	code, _, errOut = cli("trigger")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "want exactly one HANDLER")
}

func TestTriggerCommand(t *testing.T) {
	fake, cli := provisionCLI(t, fakeconsole.V34)
	code, _, errOut := cli("provision")
	require.Equal(t, 0, code, errOut)

	fake.ScriptRuns(fakeconsole.Run{Lines: []string{"demo says hi"}})
	code, out, errOut := cli("trigger", "demoJob", "-wait", "-param", "2")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `with param "2"`)
	require.Contains(t, out, "demo says hi\n")
	require.Contains(t, out, ": success")

	fake.ScriptRuns(fakeconsole.Run{Lines: []string{"demo fails"}, HandleCode: 500, HandleMsg: "failed on purpose"})
	code, out, errOut = cli("trigger", "-wait", "demoJob")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, out, "failed: code 500: failed on purpose")

	// Two declared jobs with one handler: the error names both keys.
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "jobs.yml"))
	require.NoError(t, err)
	twice := string(data) + strings.Join([]string{
		"  - key: demo-two",
		"    handler: demoJob",
		"    desc: Second demo",
		`    scheduleConf: "0 0 0 * * ?"`,
		"    running: false", ""}, "\n")
	path := filepath.Join(t.TempDir(), "jobs.yml")
	require.NoError(t, os.WriteFile(path, []byte(twice), 0o600))
	code, _, errOut = cli("trigger", "demoJob", "-jobs", path)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "(keys: demo, demo-two): choose one with -key")

	requireNoSecrets(t, fake, out, errOut)
}

// A handler name the binary does not know is a usage error, as for `run`:
// exit 2, the handlers listed, a guess at the one meant, on one line that
// names the command once. A handler the binary has but the jobs file does
// not declare is a configuration problem: exit 1, saying what to do.
func TestTriggerUnknownOrUndeclaredHandler(t *testing.T) {
	_, cli := provisionCLI(t, fakeconsole.V34)

	code, _, errOut := cli("trigger", "orderTimeoutClosJob")
	require.Equal(t, 2, code, errOut)
	first, _, _ := strings.Cut(errOut, "\n")
	require.Equal(t, `executor trigger: unknown handler "orderTimeoutClosJob"; the handlers are: `+
		strings.Join(handlers.Names(), ", ")+`; did you mean "orderTimeoutCloseJob"?`, first)
	require.Contains(t, errOut, "usage: executor trigger [flags] HANDLER")

	data, err := os.ReadFile(filepath.Join("..", "..", "config", "jobs.yml"))
	require.NoError(t, err)
	jobs, err := provision.ParseJobsFile("jobs.yml", data, "order-job-executor")
	require.NoError(t, err)
	var kept []string
	for _, j := range jobs.Jobs {
		if j.Handler != handlers.DemoJob {
			kept = append(kept, j.Handler)
		}
	}
	path := filepath.Join(t.TempDir(), "jobs.yml")
	require.NoError(t, os.WriteFile(path, []byte(dropJob(t, string(data), "demo")), 0o600))
	code, _, errOut = cli("trigger", "-jobs", path, handlers.DemoJob)
	require.Equal(t, 1, code, errOut)
	require.Equal(t, `executor trigger: handler "demoJob" is not declared in `+path+` (declared: `+strings.Join(kept, ", ")+
		`): declare a job for it there and run executor provision`+"\n", errOut)
}

// dropJob is the jobs file data without the job whose key is key: its
// "  - key: KEY" line and the lines under it up to the next job.
func dropJob(t *testing.T, data, key string) string {
	t.Helper()
	var out []string
	skipping := false
	for _, line := range strings.Split(data, "\n") {
		if strings.HasPrefix(line, "  - ") {
			skipping = line == "  - key: "+key
		}
		if !skipping {
			out = append(out, line)
		}
	}
	require.Less(t, len(out), len(strings.Split(data, "\n")), "no job %q in the jobs file", key)
	return strings.Join(out, "\n")
}
