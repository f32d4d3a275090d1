package provision

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/fakeconsole"
)

func TestApply_FirstRunCreatesGroupAndJobsWithDeclaredFields(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)

			out := b.mustApply(ApplyOptions{})

			groups := b.fake.Groups()
			require.Len(t, groups, 1)
			g := groups[0]
			want := fakeconsole.Group{ID: g.ID, AppName: testAppName, Title: "Order jobs"}
			if v == fakeconsole.VMain {
				want.AccessToken = testGroupToken // executors register only with their group's token
			}
			require.Equal(t, want, g)

			jobs := b.fake.Jobs()
			require.Len(t, jobs, 3)
			demo := jobByHandler(t, jobs, "demoJob")
			require.Equal(t, fakeconsole.Job{
				ID: demo.ID, JobGroup: g.ID, JobDesc: "Demo [prov:demo]", Author: "ops",
				ScheduleType: "CRON", ScheduleConf: "0 0 0 * * ?", MisfireStrategy: "DO_NOTHING",
				ExecutorRouteStrategy: "FIRST", ExecutorHandler: "demoJob", ExecutorBlockStrategy: "SERIAL_EXECUTION",
				GlueType: "BEAN", TriggerStatus: 0,
			}, demo)
			closeJob := jobByHandler(t, jobs, "orderTimeoutCloseJob")
			require.Equal(t, fakeconsole.Job{
				ID: closeJob.ID, JobGroup: g.ID, JobDesc: "Close unpaid orders [prov:close]", Author: "ops",
				AlarmEmail: "ops@example.com", ScheduleType: "CRON", ScheduleConf: "0 * * * * ?",
				MisfireStrategy: "DO_NOTHING", ExecutorRouteStrategy: "SHARDING_BROADCAST",
				ExecutorHandler: "orderTimeoutCloseJob", ExecutorParam: "pageSize=200",
				ExecutorBlockStrategy: "DISCARD_LATER", ExecutorTimeout: 300, ExecutorFailRetryCount: 1,
				GlueType: "BEAN", TriggerStatus: 1,
			}, closeJob)
			sweep := jobByHandler(t, jobs, "delayTaskSweepJob")
			require.Equal(t, fakeconsole.Job{
				ID: sweep.ID, JobGroup: g.ID, JobDesc: "Sweep delayed tasks [prov:sweep]", Author: "ops",
				ScheduleType: "FIX_RATE", ScheduleConf: "60", MisfireStrategy: "FIRE_ONCE_NOW",
				ExecutorRouteStrategy: "FIRST", ExecutorHandler: "delayTaskSweepJob",
				ExecutorBlockStrategy: "SERIAL_EXECUTION", ChildJobID: strconv.Itoa(demo.ID),
				GlueType: "BEAN", TriggerStatus: 1,
			}, sweep)

			// New jobs are saved stopped (no triggerStatus in the form) and
			// started by their own call; the child is created before its parent.
			var order []string
			for _, w := range b.fake.Writes() {
				_, hasStatus := w.Form["triggerStatus"]
				require.False(t, hasStatus, "%s sent triggerStatus", w.Path)
				order = append(order, w.Path+" "+w.Form.Get("executorHandler")+w.Form.Get("id")+w.Form.Get("ids[]"))
			}
			create, start := "/jobinfo/add", "/jobinfo/start"
			if v != fakeconsole.V24 {
				create = "/jobinfo/insert"
			}
			require.Equal(t, []string{
				groupCreatePath(v) + " ",
				create + " orderTimeoutCloseJob",
				start + " " + strconv.Itoa(closeJob.ID),
				create + " demoJob",
				create + " delayTaskSweepJob",
				start + " " + strconv.Itoa(sweep.ID),
			}, order)

			require.Contains(t, out, "group order-job-executor: create")
			require.Contains(t, out, "job close (orderTimeoutCloseJob): create, then start")
			require.Contains(t, out, "job demo (demoJob): create\n")
			require.Contains(t, out, "done: 3 created, 0 updated, 2 started, 0 stopped, 0 unchanged")
		})
	}
}

func groupCreatePath(v fakeconsole.Version) string {
	if v != fakeconsole.V24 {
		return "/jobgroup/insert"
	}
	return "/jobgroup/save"
}

func TestApply_ShippedJobsFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../config/jobs.yml")
	require.NoError(t, err)
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, string(data))
			b.mustApply(ApplyOptions{})
			require.Len(t, b.fake.Jobs(), 6)
			require.Equal(t, 0, jobByHandler(t, b.fake.Jobs(), "demoJob").TriggerStatus)
			require.Equal(t, 1, jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob").TriggerStatus)

			before := len(b.fake.Writes())
			out := b.mustApply(ApplyOptions{})
			require.Len(t, b.fake.Writes(), before)
			require.Contains(t, out, "nothing to do: 6 jobs unchanged")
		})
	}
}

func TestApply_SecondRunReportsUnchangedAndWritesNothing(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			b.mustApply(ApplyOptions{})
			before := len(b.fake.Writes())

			out := b.mustApply(ApplyOptions{})

			require.Len(t, b.fake.Writes(), before, "second run wrote")
			for _, l := range lines(out)[:4] {
				require.Regexp(t, `: unchanged$`, l)
			}
			require.Contains(t, out, "nothing to do: 3 jobs unchanged")
		})
	}
}

func TestApply_ChangedCronIsOneUpdateOfThatField(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			b.mustApply(ApplyOptions{})
			before := len(b.fake.Writes())
			closeJob := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")

			changed := strings.Replace(testJobs, `"0 * * * * ?"`, `"30 */2 * * * ?"`, 1)
			f, err := ParseJobsFile("jobs.yml", []byte(changed), testAppName)
			require.NoError(t, err)
			b.file = f
			out, plan, err := b.apply(ApplyOptions{})
			require.NoError(t, err, out)

			writes := b.fake.Writes()[before:]
			require.Equal(t, []string{"/jobinfo/update"}, writePaths(writes))
			// A complete form: the admin overwrites every field.
			form := writes[0].Form
			for _, fl := range (jobFields{}).list() {
				if fl.name == "jobDesc" && v == fakeconsole.VMain {
					fl.name = "name"
				}
				require.Contains(t, form, fl.name)
			}
			require.Equal(t, strconv.Itoa(closeJob.ID), form.Get("id"))
			require.Equal(t, []Change{{Field: "scheduleConf", Old: "0 * * * * ?", New: "30 */2 * * * ?"}}, plan.Jobs[0].Changes)
			require.Contains(t, out, "job close (orderTimeoutCloseJob, id "+strconv.Itoa(closeJob.ID)+"): update\n"+
				`    scheduleConf: "0 * * * * ?" -> "30 */2 * * * ?"`)

			after := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")
			closeJob.ScheduleConf = "30 */2 * * * ?"
			require.Equal(t, closeJob, after)
		})
	}
}

func TestApply_PruneStopsUndeclaredMarkedJobsOnly(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			b.mustApply(ApplyOptions{})
			groupID := b.fake.Groups()[0].ID
			base := fakeconsole.Job{JobGroup: groupID, Author: "x", ScheduleType: "CRON", ScheduleConf: "0 * * * * ?",
				MisfireStrategy: "DO_NOTHING", ExecutorRouteStrategy: "FIRST", ExecutorBlockStrategy: "SERIAL_EXECUTION", TriggerStatus: 1}
			stray := base
			stray.ExecutorHandler, stray.JobDesc = "oldJob", "Old [prov:old]"
			strayID := b.fake.AddJob(stray)
			human := base
			human.ExecutorHandler, human.JobDesc = "orderTimeoutCloseJob", "Hand-made close"
			humanID := b.fake.AddJob(human)
			other := base
			other.ExecutorHandler, other.JobDesc = "somebodyElsesJob", "Not ours"
			otherID := b.fake.AddJob(other)

			// Without -prune: reported, untouched.
			before := len(b.fake.Writes())
			out := b.mustApply(ApplyOptions{})
			require.Len(t, b.fake.Writes(), before)
			require.Contains(t, out, "job old (oldJob, id "+strconv.Itoa(strayID)+"): no longer declared: running (-prune stops it)")
			require.Contains(t, out, "job - (orderTimeoutCloseJob, id "+strconv.Itoa(humanID)+"): no [prov:...] marker, left alone")
			require.NotContains(t, out, "somebodyElsesJob")

			out = b.mustApply(ApplyOptions{Prune: true})
			writes := b.fake.Writes()[before:]
			require.Equal(t, []string{"/jobinfo/stop"}, writePaths(writes))
			require.Contains(t, out, "no longer declared: stop")
			for _, j := range b.fake.Jobs() {
				switch j.ID {
				case strayID:
					require.Equal(t, 0, j.TriggerStatus, "stray stopped")
				case humanID, otherID:
					require.Equal(t, 1, j.TriggerStatus, "unmarked job left alone")
				}
			}
			require.Len(t, b.fake.Jobs(), 6, "prune never deletes")

			// Pruned and stopped: the next -prune run writes nothing.
			before = len(b.fake.Writes())
			b.mustApply(ApplyOptions{Prune: true})
			require.Len(t, b.fake.Writes(), before)
		})
	}
}

func TestApply_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)

			out := b.mustApply(ApplyOptions{DryRun: true, Prune: true})
			require.Empty(t, b.fake.Writes())
			require.Empty(t, b.fake.Groups())
			require.Contains(t, out, "job sweep (delayTaskSweepJob): create, then start")
			require.Contains(t, out, "dry run, nothing changed: would create 3, update 0, start 2, stop 0; 0 unchanged")

			// With something to change, too.
			b.mustApply(ApplyOptions{})
			closeJob := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")
			b.fake.SetJob(closeJob.ID, func(j *fakeconsole.Job) { j.ExecutorTimeout = 5; j.TriggerStatus = 0 })
			before := len(b.fake.Writes())
			out = b.mustApply(ApplyOptions{DryRun: true})
			require.Len(t, b.fake.Writes(), before)
			require.Contains(t, out, "update, then start\n    executorTimeout: \"5\" -> \"300\"")
		})
	}
}

func TestApply_StopsBeforeSavingAJobDeclaredStopped(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V24, testJobs)
	b.mustApply(ApplyOptions{})
	demo := jobByHandler(t, b.fake.Jobs(), "demoJob")
	b.fake.SetJob(demo.ID, func(j *fakeconsole.Job) { j.TriggerStatus = 1; j.ScheduleConf = "0 0 1 * * ?" })
	before := len(b.fake.Writes())

	b.mustApply(ApplyOptions{})

	require.Equal(t, []string{"/jobinfo/stop", "/jobinfo/update"}, writePaths(b.fake.Writes()[before:]))
	require.Equal(t, 0, jobByHandler(t, b.fake.Jobs(), "demoJob").TriggerStatus)
}

func TestApply_SessionExpiryIsRenewedOnce(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			expired := 0
			b.fake.OnRequest(func(path string) {
				if path == "/jobinfo/start" && expired == 0 {
					expired++
					b.fake.ExpireSessions()
				}
			})
			b.mustApply(ApplyOptions{})
			require.Equal(t, 2, b.fake.Logins())
			require.Len(t, b.fake.Jobs(), 3)
			require.Equal(t, 1, jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob").TriggerStatus)
			require.Contains(t, b.log.String(), "admin session lost; logging in again")

			// Lost a second time in the same run: stop, naming the call.
			b2 := setup(t, v, testJobs)
			b2.fake.OnRequest(func(path string) {
				if path == "/jobgroup/pageList" {
					b2.fake.ExpireSessions()
				}
			})
			out, _, err := b2.apply(ApplyOptions{})
			require.Error(t, err, out)
			require.Contains(t, err.Error(), "session was lost again after being renewed once")
			require.Empty(t, b2.fake.Writes())
			b2.requireNoSecrets(err.Error(), out, b2.log.String())
		})
	}
}

func TestApply_SecretsAppearInNoOutputOrLog(t *testing.T) {
	t.Parallel()
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			t.Parallel()
			b := setup(t, v, testJobs)
			expired := false
			b.fake.OnRequest(func(path string) {
				if path == "/jobinfo/update" && !expired {
					expired = true
					b.fake.ExpireSessions()
				}
			})
			out1 := b.mustApply(ApplyOptions{})
			closeJob := jobByHandler(t, b.fake.Jobs(), "orderTimeoutCloseJob")
			b.fake.SetJob(closeJob.ID, func(j *fakeconsole.Job) { j.Author = "someone" })
			out2 := b.mustApply(ApplyOptions{Prune: true}) // renews the session on update
			out3, _, err := b.apply(ApplyOptions{DryRun: true})
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(b.fake.Secrets()), 4) // password + cookies
			require.Contains(t, b.log.String(), "admin call")   // debug log was on
			b.requireNoSecrets(out1, out2, out3, b.log.String())
		})
	}
}

func TestApply_AdminRefusalsAreShownAsIs(t *testing.T) {
	t.Parallel()
	t.Run("normal user cannot list groups", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V24, testJobs)
		b.fake = fakeconsole.New(t, fakeconsole.Options{Version: fakeconsole.V24, Password: b.opts.Password, NormalUser: true})
		_, _, err := b.apply(ApplyOptions{})
		require.ErrorContains(t, err, "POST /jobgroup/pageList: the admin refused: java.lang.RuntimeException: 权限拦截")
	})
	t.Run("cron the admin rejects stops the run before any write", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V34, strings.Replace(testJobs, `"0 0 0 * * ?"`, `"0 0 25 * * ?"`, 1))
		_, _, err := b.apply(ApplyOptions{})
		require.ErrorContains(t, err, `nothing changed: job demo: schedule CRON "0 0 25 * * ?": POST /jobinfo/nextTriggerTime: the admin refused: 调度类型非法`)
		require.Empty(t, b.fake.Writes())
	})
	t.Run("title too long for the 2.4 column", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V24, testJobs)
		b.file.Group.Title = "A long title" + "s" // 13: the local check is skipped here
		_, _, err := b.apply(ApplyOptions{})
		require.ErrorContains(t, err, "create group order-job-executor: POST /jobgroup/save: the admin refused: ")
		require.ErrorContains(t, err, "Data too long for column 'title'")
	})
	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakeconsole.V34, testJobs)
		b.opts.Password = "wrong-password"
		_, _, err := b.apply(ApplyOptions{})
		require.ErrorContains(t, err, "POST /auth/doLogin (login as admin): the admin refused: 账号或密码错误")
		require.NotContains(t, err.Error(), "wrong-password")
	})
}

func TestApply_DuplicateGroupsOrMarkedJobsStopTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V24, testJobs)
	b.fake.AddGroup(fakeconsole.Group{AppName: testAppName, Title: "One"})
	b.fake.AddGroup(fakeconsole.Group{AppName: testAppName, Title: "Two"})
	b.fake.AddGroup(fakeconsole.Group{AppName: testAppName + "-other", Title: "Near name"})
	_, _, err := b.apply(ApplyOptions{})
	require.ErrorContains(t, err, `2 executor groups have appname "order-job-executor" (ids 101, 102)`)

	b = setup(t, fakeconsole.V34, testJobs)
	b.mustApply(ApplyOptions{})
	demo := jobByHandler(t, b.fake.Jobs(), "demoJob")
	demo.ID = 0
	dupID := b.fake.AddJob(demo)
	before := len(b.fake.Writes())
	_, _, err = b.apply(ApplyOptions{})
	require.ErrorContains(t, err, "job demo: 2 jobs in the admin carry its handler and marker")
	require.ErrorContains(t, err, strconv.Itoa(dupID))
	require.Len(t, b.fake.Writes(), before)
}

func TestApply_UpdatesGroupTitle(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.V34, testJobs)
	id := b.fake.AddGroup(fakeconsole.Group{AppName: testAppName, Title: "Old title"})
	out := b.mustApply(ApplyOptions{})
	require.Contains(t, out, "group order-job-executor (id "+strconv.Itoa(id)+"): update\n    title: \"Old title\" -> \"Order jobs\"")
	require.Equal(t, "Order jobs", b.fake.Groups()[0].Title)
	require.Len(t, b.fake.Groups(), 1)
}

// TestApply_MainKeepsTheGroupToken: the branch after 3.4 checks executors
// against their group's token, so provisioning creates the group with the
// executors' token and puts it back when it differs; the value never shows.
func TestApply_MainKeepsTheGroupToken(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeconsole.VMain, testJobs)
	out := b.mustApply(ApplyOptions{})
	require.Contains(t, out, "with the executors' access token")
	require.Equal(t, testGroupToken, b.fake.Groups()[0].AccessToken)

	// Someone changed it in the console: the next run restores it.
	g := b.fake.Groups()[0]
	b.fake.SetGroupToken(g.ID, "changed-by-hand")
	out, plan, err := b.apply(ApplyOptions{})
	require.NoError(t, err, out)
	require.Equal(t, OpUpdate, plan.Group.Op)
	require.Contains(t, out, `accessToken: "(another token)" -> "(the executors' token)"`)
	require.Equal(t, testGroupToken, b.fake.Groups()[0].AccessToken)
	require.NotContains(t, out+b.log.String(), testGroupToken)
	require.NotContains(t, out+b.log.String(), "changed-by-hand")
	out = b.mustApply(ApplyOptions{})
	require.NotContains(t, out, "accessToken", "unchanged once restored")

	// Without a token there is nothing to create the group with.
	c, err := NewClient(ClientConfig{Addresses: []string{b.fake.URL()}, Username: b.opts.Username, Password: b.opts.Password})
	require.NoError(t, err)
	defer c.Close()
	_, err = Apply(b.ctx, c, b.file, ApplyOptions{Out: &bytes.Buffer{}})
	require.ErrorContains(t, err, "set xxl.job.accessToken")
}
