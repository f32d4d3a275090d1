package provision

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseJobsFile_ShippedFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../config/jobs.yml")
	require.NoError(t, err)
	f, err := ParseJobsFile("../../config/jobs.yml", data, "order-job-executor")
	require.NoError(t, err)
	require.Equal(t, "Order jobs", f.Group.Title)

	byHandler := map[string]JobSpec{}
	for _, j := range f.Jobs {
		byHandler[j.Handler] = j
		require.LessOrEqual(t, len([]rune(j.JobDesc())), maxDesc)
	}
	require.Len(t, byHandler, 6)
	c := byHandler["orderTimeoutCloseJob"]
	require.Equal(t, "0 * * * * ?", c.ScheduleConf)
	require.Equal(t, "SHARDING_BROADCAST", c.Route)
	require.Equal(t, "DISCARD_LATER", c.Block)
	require.Positive(t, c.TimeoutSeconds)
	require.True(t, c.Running)
	require.False(t, byHandler["demoJob"].Running)
	require.Equal(t, "0 */5 * * * ?", byHandler["deadLetterRetryJob"].ScheduleConf)
	require.Equal(t, "SHARDING_BROADCAST", byHandler["delayTaskSweepJob"].Route)
	for _, h := range []string{"orderAutoConfirmJob", "orderFulfillmentTimeoutJob"} {
		require.Regexp(t, `^0 \d+ \* \* \* \?$`, byHandler[h].ScheduleConf, "%s hourly", h)
		// Stopped until the order service writes status 3 on shipping.
		require.False(t, byHandler[h].Running, "%s must be created stopped", h)
	}

	// The timeouts are the ones the console steps and the topic pages give.
	for _, d := range []struct {
		handler, doc, text string
	}{
		{"orderTimeoutCloseJob", "../../README.md", "| Timeout | `%d` seconds"},
		{"deadLetterRetryJob", "../../docs/dead-letters.md", "| Timeout | `%d` (below the interval) |"},
		{"orderAutoConfirmJob", "../../docs/lifecycle.md", "| Block strategy / timeout | `DISCARD_LATER` / `%d` |"},
		{"orderFulfillmentTimeoutJob", "../../docs/lifecycle.md", "| Block strategy / timeout | `DISCARD_LATER` / `%d` |"},
	} {
		doc, err := os.ReadFile(d.doc)
		require.NoError(t, err)
		want := fmt.Sprintf(d.text, byHandler[d.handler].TimeoutSeconds)
		require.Contains(t, string(doc), want, "%s's timeout in config/jobs.yml and %s disagree", d.handler, d.doc)
	}
}

func TestParseJobsFile_Defaults(t *testing.T) {
	t.Parallel()
	f, err := ParseJobsFile("j.yml", []byte(`
group: {title: Order jobs}
jobs:
  - handler: demoJob
    desc: Demo
    scheduleConf: "0 0 0 * * ?"
  - handler: otherJob
    desc: Manual only
    scheduleType: NONE
`), "order-job-executor")
	require.NoError(t, err)
	require.Equal(t, JobSpec{
		Key: "demoJob", Handler: "demoJob", Desc: "Demo", Author: "provision", ScheduleType: "CRON",
		ScheduleConf: "0 0 0 * * ?", Misfire: "DO_NOTHING", Route: "FIRST", Block: "SERIAL_EXECUTION", Running: true,
	}, f.Jobs[0])
	require.Equal(t, "Demo [prov:demoJob]", f.Jobs[0].JobDesc())
	require.False(t, f.Jobs[1].Running, "NONE jobs default to stopped")
}

func TestParseJobsFile_Errors(t *testing.T) {
	t.Parallel()
	const head = "group: {title: Order jobs}\njobs:\n"
	job := func(extra string) string {
		return head + "  - handler: demoJob\n    desc: Demo\n    scheduleConf: \"0 0 0 * * ?\"\n" + extra
	}
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", job("    schedule: x\n"), []string{"field schedule not found"}},
		{"no jobs", "group: {title: Order jobs}\n", []string{"jobs: none declared"}},
		{"title", "group: {title: An overly long title}\njobs: [{handler: a, desc: b, scheduleConf: '0 0 0 * * ?'}]",
			[]string{"group.title \"An overly long title\": needs 4-12 characters"}},
		{"enums", job("    routeStrategy: first\n    blockStrategy: X\n    misfireStrategy: Y\n    scheduleType: cron\n"),
			[]string{`line 3: jobs[0] (demoJob): routeStrategy "first": one of FIRST,`, `blockStrategy "X"`, `misfireStrategy "Y"`, `scheduleType "cron"`}},
		{"cron shape", head + "  - {handler: a, desc: b, scheduleConf: '0 0 * * *'}\n  - {handler: c, desc: d, scheduleConf: '0 0 0 * * *'}\n",
			[]string{"jobs[0] (a): scheduleConf: cron \"0 0 * * *\": the admin wants 6 or 7 fields", "jobs[1] (c): scheduleConf: cron \"0 0 0 * * *\": day-of-month or day-of-week must be '?'"}},
		{"fix rate", job("    scheduleType: FIX_RATE\n"), []string{`FIX_RATE wants whole seconds`}},
		{"none with conf and running", job("    scheduleType: NONE\n    running: true\n"),
			[]string{"must be empty for NONE", "scheduleType NONE cannot be started"}},
		{"desc too long", head + "  - {key: a-rather-long-marker-key, handler: h, desc: Close the unpaid orders, scheduleConf: '0 0 0 * * ?'}\n",
			[]string{`plus the marker " [prov:a-rather-long-marker-key]" makes 55 characters; the console allows 50`}},
		{"marker in desc", head + "  - {handler: h, desc: 'Demo [prov:x]', scheduleConf: '0 0 0 * * ?'}\n", []string{`desc: must not contain "[prov:"`}},
		{"numbers", job("    timeoutSeconds: -1\n    failRetryCount: -2\n"), []string{"timeoutSeconds -1", "failRetryCount -2"}},
		{"duplicate key", job("") + "  - {handler: demoJob, desc: Again, scheduleConf: '0 0 0 * * ?'}\n",
			[]string{`jobs[1] (demoJob): key "demoJob" is also used by jobs[0]`}},
		{"children", head + "  - {key: a, handler: h, desc: d, scheduleConf: '0 0 0 * * ?', childJobs: [b, zz, a]}\n  - {key: b, handler: h, desc: d, scheduleConf: '0 0 0 * * ?'}\n",
			[]string{`childJobs: "zz" is not the key of a declared job`, "a job cannot be its own child"}},
		{"cycle", head + "  - {key: a, handler: h, desc: d, scheduleConf: '0 0 0 * * ?', childJobs: [b]}\n  - {key: b, handler: h, desc: d, scheduleConf: '0 0 0 * * ?', childJobs: [a]}\n",
			[]string{"childJobs form a cycle: a -> b -> a"}},
		{"defaults", "group: {title: Order jobs}\ndefaults: {handler: x}\njobs: [{handler: a, desc: b, scheduleConf: '0 0 0 * * ?'}]",
			[]string{"defaults: key, handler, desc, scheduleConf and childJobs belong to each job"}},
		{"handler", head + "  - {desc: d, scheduleConf: '0 0 0 * * ?'}\n  - {handler: 'a b', desc: d, scheduleConf: '0 0 0 * * ?'}\n",
			[]string{"jobs[0]: handler: required", `handler "a b": at most 100 characters, no spaces`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseJobsFile("j.yml", []byte(tt.yaml), "order-job-executor")
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "jobs file j.yml"), err.Error())
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}

	_, err := ParseJobsFile("j.yml", []byte(job("")), "app")
	require.ErrorContains(t, err, `appname "app" (xxl.job.executor.appname): the admin wants 4-64 characters`)
}

func TestMarkerKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "close", markerKey("Close unpaid orders [prov:close]"))
	require.Equal(t, "b", markerKey("[prov:a] edited by hand [prov:b]"))
	require.Equal(t, "", markerKey("Close [prov:] [prov x]"))
}

func TestDiffJob_NormalisesChildrenOnly(t *testing.T) {
	t.Parallel()
	want := jobFields{JobDesc: "D [prov:k]", ChildJobID: "3,12", ExecutorTimeout: 5}
	cur := want
	cur.ChildJobID = "12, 3"
	require.Empty(t, diffJob(cur, want))
	cur.ExecutorHandler = "demoJob " // stored untrimmed: a difference to fix
	cur.ExecutorTimeout = 0
	require.Equal(t, []Change{
		{Field: "executorHandler", Old: "demoJob ", New: ""},
		{Field: "executorTimeout", Old: "0", New: "5"},
	}, diffJob(cur, want))
}
