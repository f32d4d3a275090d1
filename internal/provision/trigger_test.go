package provision

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/fakeconsole"
)

// triggerJobs declares demoJob twice (two keys) and closeJob once.
const triggerJobs = `
group:
  title: Order jobs
jobs:
  - key: close
    handler: orderTimeoutCloseJob
    desc: Close unpaid orders
    scheduleConf: "0 * * * * ?"
    routeStrategy: SHARDING_BROADCAST
    param: "pageSize=200"
  - key: demo-a
    handler: demoJob
    desc: Demo A
    scheduleConf: "0 0 0 * * ?"
    running: false
  - key: demo-b
    handler: demoJob
    desc: Demo B
    scheduleConf: "0 0 0 * * ?"
    param: "b=1"
    running: false
`

func (b *bundle) trigger(opts TriggerOptions) (string, RunResult, error) {
	b.t.Helper()
	var out bytes.Buffer
	opts.Out = &out
	opts.PollInterval = time.Millisecond
	res, err := Trigger(b.ctx, b.newClient("auto"), b.file, opts)
	return out.String(), res, err
}

func TestTrigger_AmbiguousHandlerNamesTheCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V24, triggerJobs)
	b.mustApply(ApplyOptions{})

	_, _, err := b.trigger(TriggerOptions{Handler: "demoJob"})
	require.ErrorContains(t, err, `handler "demoJob" is declared by 2 jobs in jobs.yml (keys: demo-a, demo-b): choose one with -key`)

	// Two admin jobs carrying the same marker: named by id.
	demo := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")
	demo.ID = 0
	dup := b.fake.AddJob(demo)
	_, _, err = b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob"})
	require.ErrorContains(t, err, `2 jobs in the admin have handler "orderTimeoutCloseJob" and marker [prov:close]: `)
	require.ErrorContains(t, err, strconv.Itoa(dup)+` "Close unpaid orders [prov:close]"`)
	require.Empty(t, triggers(b.fake))
}

func TestTrigger_NotFound(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, triggerJobs)

			_, _, err := b.trigger(TriggerOptions{Handler: "noSuchJob"})
			require.ErrorContains(t, err, `handler "noSuchJob" is not declared in jobs.yml (declared: orderTimeoutCloseJob, demoJob)`)

			_, _, err = b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob"})
			require.ErrorContains(t, err, `the admin has 0 executor groups with appname "order-job-executor", want 1 (run executor provision)`)

			b.mustApply(ApplyOptions{})
			// A job with the handler but without the marker is not ours.
			job := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")
			b.fake.SetJob(job.ID, func(j *fakeconsole.Job) { j.JobDesc = "Close unpaid orders" })
			_, _, err = b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob"})
			require.ErrorContains(t, err, `no job in the admin's group order-job-executor has handler "orderTimeoutCloseJob" and marker [prov:close]`)
			require.Empty(t, triggers(b.fake))
		})
	}
}

func triggers(f *fakeconsole.Console) []fakeconsole.Request {
	var out []fakeconsole.Request
	for _, w := range f.Writes() {
		if w.Path == "/jobinfo/trigger" {
			out = append(out, w)
		}
	}
	return out
}

func TestTrigger_WaitSuccess(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, triggerJobs)
			b.mustApply(ApplyOptions{})
			b.fake.ScriptRuns(fakeconsole.Run{Lines: []string{"closing <orders>", "closed 3 & skipped 1"}})
			// An older run must not be taken for ours.
			_, _, err := b.trigger(TriggerOptions{Handler: "demoJob", Key: "demo-b"})
			require.NoError(t, err)

			out, res, err := b.trigger(TriggerOptions{Handler: "demoJob", Key: "demo-b", Wait: true})
			require.NoError(t, err)
			require.True(t, res.Success)
			logs := b.fake.Logs()
			require.Equal(t, []int64{logs[len(logs)-1].ID}, res.LogIDs)
			require.Equal(t, "b=1", triggers(b.fake)[1].Form.Get("executorParam"), "the job's own param by default")
			demo := jobByHandlerKey(t, b.fake.Jobs(), "demo-b")
			require.Equal(t, strings.Join([]string{
				`triggered job demo-b (demoJob, id ` + strconv.Itoa(demo.ID) + `) with param "b=1"`,
				"closing <orders>",
				"closed 3 & skipped 1",
				"run " + strconv.FormatInt(res.LogIDs[0], 10) + " on http://127.0.0.1:9999/: success",
			}, "\n")+"\n", out)
			b.requireNoSecrets(out, b.log.String())
		})
	}
}

func jobByHandlerKey(t *testing.T, jobs []fakeconsole.Job, key string) fakeconsole.Job {
	t.Helper()
	for _, j := range jobs {
		if markerKey(j.JobDesc) == key {
			return j
		}
	}
	t.Fatalf("no job with key %s", key)
	return fakeconsole.Job{}
}

func TestTrigger_WaitFailure(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, triggerJobs)
			b.mustApply(ApplyOptions{})
			b.fake.ScriptRuns(fakeconsole.Run{Lines: []string{"boom"}, HandleCode: 500, HandleMsg: "db down<br>retry later"})
			param := ""
			out, res, err := b.trigger(TriggerOptions{Handler: "demoJob", Key: "demo-a", Param: &param, Wait: true})
			require.NoError(t, err)
			require.False(t, res.Success)
			require.Equal(t, "code 500: db down; retry later", res.Message)
			require.Contains(t, out, "boom\nrun ")
			require.Contains(t, out, ": failed: code 500: db down; retry later")
		})
	}
}

func TestTrigger_WaitBroadcastAndTriggerFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V34, triggerJobs)
	b.mustApply(ApplyOptions{})

	b.fake.ScriptRuns(fakeconsole.Run{Lines: []string{"shard line"}, Shards: 3})
	p := "pageSize=10"
	out, res, err := b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob", Param: &p, Wait: true})
	require.NoError(t, err)
	require.True(t, res.Success)
	require.Len(t, res.LogIDs, 3)
	require.Equal(t, 3, strings.Count(out, "shard line"))
	require.Contains(t, out, "shard 2/3 on http://127.0.0.1:10001/: success")
	require.Equal(t, "pageSize=10", triggers(b.fake)[0].Form.Get("executorParam"))

	b.fake.ScriptRuns(fakeconsole.Run{TriggerMsg: "调度失败：执行器地址为空"})
	out, res, err = b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob", Wait: true})
	require.NoError(t, err)
	require.False(t, res.Success)
	require.Contains(t, out, "failed: trigger failed: 调度失败：执行器地址为空")
}

func TestTrigger_NoWaitReturnsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V24, triggerJobs)
	b.mustApply(ApplyOptions{})
	out, res, err := b.trigger(TriggerOptions{Handler: "orderTimeoutCloseJob"})
	require.NoError(t, err)
	require.Empty(t, res.LogIDs)
	require.Contains(t, out, `with param "pageSize=200"`)
	require.Len(t, triggers(b.fake), 1)
	require.Equal(t, "", triggers(b.fake)[0].Form.Get("addressList"))
}
