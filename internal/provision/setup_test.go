package provision

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/internal/fakeconsole"
	"github.com/orderjob/executor/internal/syncbuf"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testAppName = "order-job-executor"

// testJobs is a small jobs file using most settings.
const testJobs = `
group:
  title: Order jobs
defaults:
  author: ops
jobs:
  - key: close
    handler: orderTimeoutCloseJob
    desc: Close unpaid orders
    scheduleConf: "0 * * * * ?"
    routeStrategy: SHARDING_BROADCAST
    blockStrategy: DISCARD_LATER
    timeoutSeconds: 300
    failRetryCount: 1
    alarmEmail: ops@example.com
    param: "pageSize=200"
  - key: demo
    handler: demoJob
    desc: Demo
    scheduleConf: "0 0 0 * * ?"
    running: false
  - key: sweep
    handler: delayTaskSweepJob
    desc: Sweep delayed tasks
    scheduleType: FIX_RATE
    scheduleConf: "60"
    misfireStrategy: FIRE_ONCE_NOW
    childJobs: [demo]
`

var versions = []fakeconsole.Version{fakeconsole.V24, fakeconsole.V34, fakeconsole.VMain}

// testGroupToken is the executors' access token the clients carry.
const testGroupToken = "group-T0ken"

type bundle struct {
	fake *fakeconsole.Console
	file *JobsFile
	log  *syncbuf.Buffer // process log of every client made by newClient
	ctx  context.Context
	t    *testing.T
	opts fakeconsole.Options
}

func setup(t *testing.T, v fakeconsole.Version, jobsYAML string) *bundle {
	t.Helper()
	opts := fakeconsole.Options{Version: v, Username: "admin", Password: "s3cret-Pa55"}
	f, err := ParseJobsFile("jobs.yml", []byte(jobsYAML), testAppName)
	require.NoError(t, err)
	return &bundle{fake: fakeconsole.New(t, opts), file: f, log: &syncbuf.Buffer{}, ctx: t.Context(), t: t, opts: opts}
}

// newClient makes a fresh client (a new run) logging at debug level.
func (b *bundle) newClient(version string) *Client {
	b.t.Helper()
	c, err := NewClient(ClientConfig{
		Addresses:  []string{b.fake.URL()},
		Username:   b.opts.Username,
		Password:   b.opts.Password,
		Version:    version,
		GroupToken: testGroupToken,
		Logger:     slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(b.t, err)
	b.t.Cleanup(c.Close)
	return c
}

// apply runs one provision with a fresh client and returns its output.
func (b *bundle) apply(opts ApplyOptions) (string, *Plan, error) {
	b.t.Helper()
	var out bytes.Buffer
	opts.Out = &out
	p, err := Apply(b.ctx, b.newClient("auto"), b.file, opts)
	return out.String(), p, err
}

func (b *bundle) mustApply(opts ApplyOptions) string {
	b.t.Helper()
	out, _, err := b.apply(opts)
	require.NoError(b.t, err, "output:\n%s", out)
	return out
}

// requireNoSecrets checks the password and every cookie the console issued
// appear nowhere in texts.
func (b *bundle) requireNoSecrets(texts ...string) {
	b.t.Helper()
	for _, s := range b.fake.Secrets() {
		for _, txt := range texts {
			require.NotContains(b.t, txt, s, "a secret leaked")
		}
	}
}

// jobByHandler returns the console's job with handler, failing if not one.
func jobByHandler(t *testing.T, jobs []fakeconsole.Job, handler string) fakeconsole.Job {
	t.Helper()
	var found []fakeconsole.Job
	for _, j := range jobs {
		if j.ExecutorHandler == handler {
			found = append(found, j)
		}
	}
	require.Len(t, found, 1, "jobs with handler %s", handler)
	return found[0]
}

func writePaths(ws []fakeconsole.Request) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Path)
	}
	return out
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
