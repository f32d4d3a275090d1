package fakeconsole

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testClient struct {
	t    *testing.T
	c    *Console
	http *http.Client
}

func newTestClient(t *testing.T, v Version) *testClient {
	jar, _ := cookiejar.New(nil)
	c := New(t, Options{Version: v})
	hc := &http.Client{Jar: jar, Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	return &testClient{t: t, c: c, http: hc}
}

// reply is what a test reads of a response whose body post has read.
type reply struct {
	StatusCode int
	Header     http.Header
}

func (tc *testClient) post(path string, form url.Values) (reply, map[string]any) {
	tc.t.Helper()
	resp, err := tc.http.PostForm(tc.c.URL()+path, form)
	require.NoError(tc.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, m
}

func (tc *testClient) login() {
	tc.t.Helper()
	_, m := tc.post(tc.c.loginPath, url.Values{"userName": {"admin"}, "password": {"123456"}})
	require.EqualValues(tc.t, 200, m["code"])
}

func TestConsole_NotLoggedIn(t *testing.T) {
	t.Parallel()
	tc := newTestClient(t, V24)
	resp, _ := tc.post("/jobgroup/pageList", nil)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, "/xxl-job-admin/toLogin", resp.Header.Get("Location"))
	resp, _ = tc.post("/auth/doLogin", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "2.4 has no /auth/doLogin")

	tc = newTestClient(t, V34)
	resp, m := tc.post("/jobgroup/pageList", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 500, m["code"])
	require.Equal(t, "not login for path:/jobgroup/pageList", m["msg"])
	require.True(t, strings.HasPrefix(tc.c.URL(), "http://"), "3.4.1+ serves at the root")
}

func TestConsole_ListShapesAndParams(t *testing.T) {
	t.Parallel()
	tc := newTestClient(t, V24)
	tc.login()
	_, m := tc.post("/jobinfo/pageList", url.Values{"jobGroup": {"0"}, "triggerStatus": {"-1"}})
	require.Contains(t, m, "recordsTotal", "2.4 lists are bare")
	_, m = tc.post("/jobinfo/pageList", url.Values{"jobGroup": {"0"}})
	require.EqualValues(t, 500, m["code"], "triggerStatus is required")

	tc = newTestClient(t, V34)
	tc.login()
	_, m = tc.post("/jobinfo/pageList", url.Values{"jobGroup": {"0"}, "triggerStatus": {"-1"}})
	require.EqualValues(t, 500, m["code"], "3.x requires the string filters too")
	_, m = tc.post("/jobinfo/pageList", url.Values{"jobGroup": {"0"}, "triggerStatus": {"-1"},
		"jobDesc": {""}, "executorHandler": {""}, "author": {""}, "offset": {"0"}, "pagesize": {"5"}})
	data := m["data"].(map[string]any)
	require.EqualValues(t, 0, data["total"])
	require.EqualValues(t, 5, data["pagesize"])
}

func TestConsole_UpdateOverwritesOmittedFields(t *testing.T) {
	t.Parallel()
	tc := newTestClient(t, V34)
	tc.login()
	g := tc.c.AddGroup(Group{AppName: "order-job-executor", Title: "Orders"})
	id := tc.c.AddJob(Job{JobGroup: g, JobDesc: "d", Author: "a", AlarmEmail: "x@y", ScheduleType: "CRON",
		ScheduleConf: "0 * * * * ?", MisfireStrategy: "DO_NOTHING", ExecutorRouteStrategy: "FIRST",
		ExecutorHandler: "h", ExecutorBlockStrategy: "SERIAL_EXECUTION", ExecutorTimeout: 9})
	_, m := tc.post("/jobinfo/update", url.Values{"id": {itoa(id)}, "jobGroup": {itoa(g)}, "jobDesc": {"d"}, "author": {"a"},
		"scheduleType": {"CRON"}, "scheduleConf": {"0 * * * * ?"}, "misfireStrategy": {"DO_NOTHING"},
		"executorRouteStrategy": {"FIRST"}, "executorHandler": {"h"}, "executorBlockStrategy": {"SERIAL_EXECUTION"}})
	require.EqualValues(t, 200, m["code"])
	j := tc.c.Jobs()[0]
	require.Empty(t, j.AlarmEmail)
	require.Zero(t, j.ExecutorTimeout)

	resp, _ := tc.post("/jobinfo/update", url.Values{"id": {itoa(id)}, "executorTimeout": {""}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "an empty int field fails in the binder")

	_, m = tc.post("/jobinfo/start", url.Values{"id": {itoa(id)}})
	require.EqualValues(t, 500, m["code"], "3.4 takes ids[]")
	_, m = tc.post("/jobinfo/start", url.Values{"ids[]": {itoa(id)}})
	require.EqualValues(t, 200, m["code"])
	require.Equal(t, 1, tc.c.Jobs()[0].TriggerStatus)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
