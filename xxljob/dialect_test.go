package xxljob_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// TestDialectAnswers pins every answer whose shape depends on the admin
// generation, as that generation's Java executor gives it (2.4.2, 3.3.0,
// 3.4.2 and the branch after 3.4 read from their sources).
func TestDialectAnswers(t *testing.T) {
	t.Parallel()
	type want struct {
		ok, killed, repeat string
		logKeys            []string // envelope keys of a /log answer
		pastEnd            int      // toLineNum when fromLineNum is past the end
	}
	tests := []struct {
		version xxljob.AdminVersion
		admin   xxljobtest.Version
		want    want
	}{
		{xxljob.Admin2x, xxljobtest.V24, want{`{"code":200}`, `{"code":200,"msg":"job thread already killed."}`,
			`{"code":500,"msg":"repeate trigger job, logId:%d"}`, []string{"code", "content"}, 5}},
		{xxljob.Admin33, xxljobtest.V33, want{`{"code":200,"msg":"Success"}`, `{"code":200,"msg":"Success","data":"job thread already killed."}`,
			`{"code":500,"msg":"repeate trigger job, logId:%d"}`, []string{"code", "msg", "data"}, 0}},
		{xxljob.Admin34, xxljobtest.V34, want{`{"code":200,"msg":"Success"}`, `{"code":200,"msg":"Success","data":"job thread already killed."}`,
			`{"code":500,"msg":"repeat trigger job, logId:%d"}`, []string{"code", "msg", "data"}, 0}},
		{xxljob.AdminMain, xxljobtest.Main, want{`{"code":200,"msg":"Success"}`, `{"code":200,"msg":"Success","data":"job thread already killed."}`,
			`{"code":500,"msg":"repeat trigger job, logId:%d"}`, []string{"code", "msg", "data"}, 0}},
	}
	for _, tc := range tests {
		t.Run(string(tc.version), func(t *testing.T) {
			t.Parallel()
			g := newGate()
			admin := xxljobtest.New(t, xxljobtest.Options{Version: tc.admin, Token: "T", Groups: map[string]string{"test-executor": "T"}})
			b := setup(t, opts{admin: admin, token: "T", version: tc.version, adminVersion: tc.admin,
				handlers: map[string]xxljob.Handler{"block": g.handler(), "ok": okHandler("")}})
			t.Cleanup(g.open)

			env, err := b.client.Beat(t.Context())
			require.NoError(t, err)
			require.Equal(t, tc.want.ok, string(env.Raw), "beat")
			env, err = b.client.IdleBeat(t.Context(), 9)
			require.NoError(t, err)
			require.Equal(t, tc.want.ok, string(env.Raw), "idleBeat")
			env, err = b.client.Kill(t.Context(), 9)
			require.NoError(t, err)
			require.Equal(t, tc.want.killed, string(env.Raw), "kill without a job thread")

			p := xxljobtest.Trigger(1, "block", nextLogID())
			env, err = b.client.Run(t.Context(), p)
			require.NoError(t, err)
			require.Equal(t, tc.want.ok, string(env.Raw), "trigger accepted")
			g.waitStarted(t, p.LogID)
			env, err = b.client.Run(t.Context(), p)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf(tc.want.repeat, p.LogID), string(env.Raw), "repeated logId")
			env, err = b.client.Kill(t.Context(), 1)
			require.NoError(t, err)
			require.Equal(t, tc.want.ok, string(env.Raw), "kill")
			cb := b.callback(t, p.LogID)
			require.Equal(t, "scheduling center kill job. [job running, killed]", cb.HandleMsg)
			require.Equal(t, p.LogDateTime, cb.LogDateTim, "the trigger time reaches the admin in its spelling")
			waitFor(t, func() bool { return strings.Contains(b.runLogNow(p), "callback finish") }, "the log's last line")

			env, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
			require.NoError(t, err)
			require.Equal(t, tc.want.logKeys, jsonKeys(t, env.Raw), "the log once, in the admin's field")
			require.NotNil(t, lr)
			last := lr.ToLineNum
			_, lr, err = b.client.Log(t.Context(), p.LogDateTime, p.LogID, last+1)
			require.NoError(t, err)
			want := tc.want.pastEnd
			if want != 0 {
				want = last
			}
			require.Equal(t, want, lr.ToLineNum, "toLineNum past the end")
			require.Empty(t, lr.LogContent)
		})
	}
}

// TestDialectAutoLearns: an auto executor answers in a form every admin
// accepts until the admin's first answer tells its generation.
func TestDialectAutoLearns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		admin  xxljobtest.Version
		killed string
		keys   []string
	}{
		{xxljobtest.V24, `{"code":200,"msg":"job thread already killed."}`, []string{"code", "content"}},
		{xxljobtest.V34, `{"code":200,"msg":"Success","data":"job thread already killed."}`, []string{"code", "msg", "data"}},
	} {
		t.Run(tc.admin.String(), func(t *testing.T) {
			t.Parallel()
			admin := xxljobtest.New(t, xxljobtest.Options{Version: tc.admin})
			admin.SetMode(xxljobtest.Down503) // nothing learned yet
			b := setup(t, opts{admin: admin, version: xxljob.AdminAuto, adminVersion: tc.admin})
			env, err := b.client.Kill(t.Context(), 9)
			require.NoError(t, err)
			require.Equal(t, `{"code":200,"msg":"job thread already killed.","data":"job thread already killed."}`, string(env.Raw),
				"unknown: the text where either generation reads it")
			env, _, err = b.client.Log(t.Context(), 1700000000123, 99999, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"code", "content", "data"}, jsonKeys(t, env.Raw), "unknown: both fields")

			admin.SetMode(xxljobtest.Up)
			_, err = admin.WaitRegistrations(2, waitLong) // the first answer was read before the second request
			require.NoError(t, err)
			env, err = b.client.Kill(t.Context(), 9)
			require.NoError(t, err)
			require.Equal(t, tc.killed, string(env.Raw))
			env, _, err = b.client.Log(t.Context(), 1700000000123, 99999, 1)
			require.NoError(t, err)
			require.Equal(t, tc.keys, jsonKeys(t, env.Raw))
			require.Contains(t, b.logs.String(), "admin dialect learned")
		})
	}
}

// TestMainDialect runs every exchange of the branch after 3.4 against the
// fake admin built from it: registration needs the group and its token,
// /trigger, the XXL-JOB-APPNAME checks, the object-shaped callback with
// logDateTime, and /log with logDateTime.
func TestMainDialect(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{Version: xxljobtest.Main, ContextPath: "/"})
	b := setup(t, opts{admin: admin, token: "group-token", version: xxljob.AdminMain, adminVersion: xxljobtest.Main,
		handlers: map[string]xxljob.Handler{"h": closeOrders()}})

	// No group yet: the admin refuses, the executor says why.
	waitFor(t, func() bool {
		return strings.Contains(b.logs.String(), "no executor group")
	}, "registration refused for want of a group")
	require.Empty(t, admin.Registrations())
	admin.SetGroup("test-executor", "group-token") // what `executor provision` does
	regs, err := admin.WaitRegistrations(1, waitLong)
	require.NoError(t, err)
	require.Equal(t, "test-executor", regs[0].RegistryKey)
	var sent xxljobtest.Request
	for _, r := range admin.Requests() {
		if strings.HasSuffix(r.Path, "/api/registry") {
			sent = r
		}
	}
	require.Equal(t, "group-token", sent.Header.Get("XXL-JOB-ACCESS-TOKEN"))
	require.Equal(t, "test-executor", sent.Header.Get("XXL-JOB-APPNAME"))
	require.False(t, strings.Contains(admin.URL, "xxl-job-admin"), "context path / from 3.4.1")

	// /trigger, and its callback as {"callbackList":[...]} with logDateTime.
	p := xxljobtest.Trigger(7, "h", nextLogID())
	b.run(t, p)
	cb := b.callback(t, p.LogID)
	require.Equal(t, "closed 3 orders", cb.HandleMsg)
	require.JSONEq(t, fmt.Sprintf(`{"logId":%d,"logDateTime":%d,"handleCode":200,"handleMsg":"closed 3 orders"}`, p.LogID, p.LogDateTime), string(cb.Raw))
	for _, r := range admin.Requests() {
		if strings.HasSuffix(r.Path, "/api/callback") {
			var body map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(r.Body, &body), "an object: %s", r.Body)
			require.Contains(t, body, "callbackList")
		}
	}
	_, lr, err := b.client.Log(t.Context(), p.LogDateTime, p.LogID, 1)
	require.NoError(t, err)
	require.Contains(t, lr.LogContent, "----------- xxl-job job execute start")

	// /run still answers (an admin of the older generation may call it).
	old := xxljobtest.Trigger(8, "h", nextLogID())
	env, err := b.client.Post(t.Context(), "run", mustJSON(t, old))
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	b.callback(t, old.LogID)

	// The executor's checks of the admin's headers.
	addr := "http://" + b.exec.Addr().String()
	for _, tc := range []struct {
		token, appname, want string
	}{
		{"", "test-executor", "invalid request, accessToken or appname is empty."},
		{"group-token", "", "invalid request, accessToken or appname is empty."},
		{"wrong", "test-executor", "invalid request, accessToken or appname invalid."},
		{"group-token", "other-group", "invalid request, accessToken or appname invalid."},
	} {
		c := xxljobtest.NewClient(addr, tc.token, xxljobtest.Main)
		c.AppName = tc.appname
		env, err := c.Beat(t.Context())
		c.Close()
		require.NoError(t, err)
		require.Equal(t, `{"code":500,"msg":"`+tc.want+`"}`, string(env.Raw), "token %q appname %q", tc.token, tc.appname)
	}
}

// TestDialectAutoMain: an auto executor under a main admin learns the
// dialect from the admin's calls and sends the object-shaped callback.
func TestDialectAutoMain(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{Version: xxljobtest.Main, Groups: map[string]string{"test-executor": "T"}})
	b := setup(t, opts{admin: admin, token: "T", version: xxljob.AdminAuto, adminVersion: xxljobtest.Main,
		handlers: map[string]xxljob.Handler{"ok": okHandler("fine")}})
	_, err := admin.WaitRegistrations(1, waitLong)
	require.NoError(t, err)
	p := xxljobtest.Trigger(1, "ok", nextLogID())
	b.run(t, p)
	cb := b.callback(t, p.LogID)
	require.Equal(t, "fine", cb.HandleMsg)
	require.Equal(t, p.LogDateTime, cb.LogDateTim)
}

// TestDialectAutoMainAfterRestart: results spooled before any admin call
// came (no /trigger seen yet) reach a main admin too: its refusal to parse
// an array switches the callback's shape.
func TestDialectAutoMainAfterRestart(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := root + "/callbacklogs"
	require.NoError(t, mkdirAll(dir))
	require.NoError(t, writeFile(dir+"/xxl-job-callback-1.log", `[{"logId":4242,"logDateTime":1700000000123,"handleCode":200,"handleMsg":"from java"}]`))
	admin := xxljobtest.New(t, xxljobtest.Options{Version: xxljobtest.Main, Groups: map[string]string{"test-executor": "T"}})
	b := setup(t, opts{admin: admin, token: "T", version: xxljob.AdminAuto, adminVersion: xxljobtest.Main, logPath: root,
		cfg: func(c *xxljob.Config) { c.RegistryInterval = time.Hour }})
	cb := b.callback(t, 4242)
	require.Equal(t, "from java", cb.HandleMsg)
	require.Equal(t, int64(1700000000123), cb.LogDateTim)
}

// TestDialectNotLearnedFromStrangers: a request that fails the token check
// does not change how an auto executor answers its admin.
func TestDialectNotLearnedFromStrangers(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{token: "T", version: xxljob.AdminAuto})
	_, err := b.admin.WaitRegistrations(2, waitLong) // learned 2.x from the admin's answers
	require.NoError(t, err)
	stranger := xxljobtest.NewClient("http://"+b.exec.Addr().String(), "guess", xxljobtest.Main)
	stranger.AppName = "test-executor"
	defer stranger.Close()
	env, err := stranger.Run(t.Context(), xxljobtest.Trigger(1, "x", nextLogID()))
	require.NoError(t, err)
	require.Equal(t, `{"code":500,"msg":"The access token is wrong."}`, string(env.Raw))
	env, err = b.client.Kill(t.Context(), 9)
	require.NoError(t, err)
	require.Equal(t, `{"code":200,"msg":"job thread already killed."}`, string(env.Raw), "still 2.x")
	require.NotContains(t, b.logs.String(), "to=main")
}

// TestDialectNotLearnedFromBadRequests: a /trigger (or a call naming a
// group) teaches an auto executor the main dialect only when it passed the
// token check and its body decoded, and only when a token is configured.
// Before, one broken-body POST /trigger to an executor without a token
// switched it to main, and its 3.4 admin's /run and /beat were refused
// until restart.
func TestDialectNotLearnedFromBadRequests(t *testing.T) {
	t.Parallel()
	broken := func(string) []byte { return []byte("x") }
	valid := func(string) []byte {
		b, err := json.Marshal(xxljobtest.Trigger(1, "nosuch", nextLogID()))
		if err != nil {
			panic(err)
		}
		return b
	}
	tests := []struct {
		name     string
		token    string // the executor's
		send     string // the stranger's token header ("" none)
		appName  bool   // the stranger names the group
		path     string
		body     func(string) []byte
		wantCode int
	}{
		{"open executor, broken /trigger", "", "", false, "/trigger", broken, 500},
		{"open executor, broken /trigger naming the group", "", "", true, "/trigger", broken, 500},
		{"open executor, well-formed /trigger", "", "", true, "/trigger", valid, 500},
		{"open executor, broken /kill naming the group", "", "", true, "/kill", broken, 500},
		{"wrong token, broken /trigger", "T-0123456789abcdef", "guess", true, "/trigger", broken, 500},
		{"no token sent, broken /trigger", "T-0123456789abcdef", "", false, "/trigger", broken, 500},
		{"right token, broken /trigger", "T-0123456789abcdef", "T-0123456789abcdef", false, "/trigger", broken, 500},
		{"right token, broken /log naming the group", "T-0123456789abcdef", "T-0123456789abcdef", true, "/log", broken, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			admin := xxljobtest.New(t, xxljobtest.Options{Version: xxljobtest.V34, Token: tc.token})
			b := setup(t, opts{admin: admin, token: tc.token, version: xxljob.AdminAuto, adminVersion: xxljobtest.V34,
				handlers: map[string]xxljob.Handler{"ok": okHandler("fine")}})
			_, err := admin.WaitRegistrations(2, waitLong) // 3.4 learned from the admin's answers
			require.NoError(t, err)

			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+b.exec.Addr().String()+tc.path,
				bytes.NewReader(tc.body(tc.path)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			if tc.send != "" {
				req.Header.Set("XXL-JOB-ACCESS-TOKEN", tc.send)
			}
			if tc.appName {
				req.Header.Set("XXL-JOB-APPNAME", "test-executor")
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			var env struct{ Code int }
			require.NoError(t, json.Unmarshal(raw, &env), "%s", raw)
			require.Equal(t, tc.wantCode, env.Code, "the stranger's answer: %s", raw)

			env2, err := b.client.Beat(t.Context())
			require.NoError(t, err)
			require.Equal(t, `{"code":200,"msg":"Success"}`, string(env2.Raw), "the 3.4 admin's beat")
			p := xxljobtest.Trigger(1, "ok", nextLogID())
			b.run(t, p)
			require.Equal(t, "fine", b.callback(t, p.LogID).HandleMsg)
			require.NotContains(t, b.logs.String(), "to=main")
		})
	}
}
