package xxljobtest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// post sends a raw request to the admin and returns status and body.
func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	if token != "" {
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", token)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	a := xxljobtest.New(t, xxljobtest.Options{Token: "T"})
	require.True(t, strings.HasSuffix(a.URL, "/xxl-job-admin"))
	reg := `{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"http://10.0.0.5:9999/"}`

	code, body := post(t, a.URL+"/api/registry", "T", reg)
	require.Equal(t, 200, code)
	require.Equal(t, `{"code":200,"msg":null,"content":null}`, body)
	code, body = post(t, a.URL+"/api/registry", "wrong", reg)
	require.Equal(t, 200, code)
	require.Equal(t, `{"code":500,"msg":"The access token is wrong.","content":null}`, body)
	_, body = post(t, a.URL+"/api/registry", "T", `{"registryGroup":"EXECUTOR","registryKey":" ","registryValue":"x"}`)
	require.Equal(t, `{"code":500,"msg":"Illegal Argument.","content":null}`, body)
	_, body = post(t, a.URL+"/api/registryRemove", "T", reg)
	require.Equal(t, `{"code":200,"msg":null,"content":null}`, body)
	_, body = post(t, a.URL+"/api/nope", "T", `{}`)
	require.Equal(t, `{"code":500,"msg":"invalid request, uri-mapping(nope) not found.","content":null}`, body)

	want := xxljobtest.Registry{RegistryGroup: "EXECUTOR", RegistryKey: "app", RegistryValue: "http://10.0.0.5:9999/"}
	require.Equal(t, []xxljobtest.Registry{want}, a.Registrations())
	require.Equal(t, []xxljobtest.Registry{want}, a.Removals())

	// First callback per logId wins; repeats are counted.
	_, body = post(t, a.URL+"/api/callback", "T", `[{"logId":1,"logDateTim":5,"handleCode":500,"handleMsg":"first"},{"logId":2,"logDateTim":6,"handleCode":200}]`)
	require.Equal(t, `{"code":200,"msg":null,"content":null}`, body)
	_, _ = post(t, a.URL+"/api/callback", "T", `[{"logId":1,"logDateTim":5,"handleCode":200,"handleMsg":"second","extra":true}]`)
	cb, err := a.WaitCallback(1, time.Second)
	require.NoError(t, err)
	require.Equal(t, "first", cb.HandleMsg)
	require.Equal(t, 1, a.Repeats(1))
	require.Len(t, a.Callbacks(), 2)
	require.Equal(t, 2, a.CallbackBatches())
	_, err = a.WaitCallback(3, 10*time.Millisecond)
	require.Error(t, err)

	code, _ = post(t, a.URL+"/api/callback", "T", `{"not":"an array"}`)
	require.Equal(t, 500, code)
}

func TestAdminModes(t *testing.T) {
	t.Parallel()
	a := xxljobtest.New(t, xxljobtest.Options{ContextPath: "ctx", Version: xxljobtest.V34})
	require.True(t, strings.HasSuffix(a.URL, "/ctx"))
	reg := `{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"v"}`

	_, body := post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, `{"code":200,"msg":"Success","data":null,"success":true}`, body, "3.4 envelope")
	_, body = post(t, a.URL+"/api/registry", "", "")
	require.Equal(t, `{"code":500,"msg":"invalid request, requestBody empty.","data":null,"success":false}`, body, "3.4 rejects a blank body")
	_, body = post(t, a.URL+"/api/callback", "", `{"callbackList":[]}`)
	require.Contains(t, body, `"msg":"openapi invoke error: `, "3.4 wants an array")

	a.SetMode(xxljobtest.Down503)
	code, _ := post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, 503, code)
	a.SetMode(xxljobtest.DownClose)
	code, _ = post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, 0, code, "connection dropped")
	a.SetMode(xxljobtest.Up)
	regs, err := a.WaitRegistrations(1, time.Second)
	require.NoError(t, err)
	require.Len(t, regs, 1, "nothing recorded while down")
}

func TestAdminHang(t *testing.T) {
	t.Parallel()
	a := xxljobtest.New(t, xxljobtest.Options{})
	a.SetMode(xxljobtest.Hang)
	reg := `{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"v"}`
	done := make(chan int)
	go func() {
		code, _ := post(t, a.URL+"/api/registry", "", reg)
		done <- code
	}()
	// Held before the mode changes: a request arriving after it is served.
	require.NoError(t, xxljobtest.WaitHanging(a, 1, 5*time.Second))
	select {
	case <-done:
		t.Fatal("a hanging admin answered")
	case <-time.After(50 * time.Millisecond):
	}
	a.SetMode(xxljobtest.Up)
	require.Equal(t, 0, <-done, "the hung request is dropped, never answered")
	require.Empty(t, a.Registrations(), "nor recorded")
}

// TestAdminMain checks the branch after 3.4: the executor group's token
// found by XXL-JOB-APPNAME, and the object-shaped callback.
func TestAdminMain(t *testing.T) {
	t.Parallel()
	a := xxljobtest.New(t, xxljobtest.Options{Version: xxljobtest.Main, ContextPath: "/"})
	reg := `{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"v"}`
	call := func(path, token, appname, body string) string {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", token)
		if appname != "" {
			req.Header.Set("XXL-JOB-APPNAME", appname)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, `{"code":500,"msg":"invalid request, accessToken or appname is empty.","data":null,"success":false}`, call("/api/registry", "T", "", reg))
	require.Equal(t, `{"code":500,"msg":"invalid request, accessToken or appname invalid.","data":null,"success":false}`, call("/api/registry", "T", "app", reg), "no such group yet")
	a.SetGroup("app", "T")
	require.Equal(t, `{"code":500,"msg":"invalid request, accessToken or appname invalid.","data":null,"success":false}`, call("/api/registry", "U", "app", reg))
	require.Equal(t, `{"code":200,"msg":"Success","data":null,"success":true}`, call("/api/registry", "T", "app", reg))
	require.Len(t, a.Registrations(), 1)

	require.Contains(t, call("/api/callback", "T", "app", `[{"logId":1,"logDateTim":5,"handleCode":200}]`), `"msg":"openapi invoke error: `)
	require.Equal(t, `{"code":200,"msg":"Success","data":null,"success":true}`,
		call("/api/callback", "T", "app", `{"callbackList":[{"logId":1,"logDateTime":5,"handleCode":200,"handleMsg":"ok"}]}`))
	cb, err := a.WaitCallback(1, time.Second)
	require.NoError(t, err)
	require.Equal(t, xxljobtest.Callback{LogID: 1, LogDateTim: 5, HandleCode: 200, HandleMsg: "ok", Raw: cb.Raw}, cb)
}

// TestClientSendsAdminRequests checks the admin → executor requests.
func TestClientSendsAdminRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []xxljobtest.Request
	exec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, xxljobtest.Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		mu.Unlock()
		if r.URL.Path == "/log" {
			io.WriteString(w, `{"code":200,"content":{"fromLineNum":1,"toLineNum":2,"logContent":"a\nb\n","isEnd":false},"data":{"fromLineNum":1,"toLineNum":0,"logContent":"","isEnd":true}}`)
			return
		}
		io.WriteString(w, `{"code":200}`)
	}))
	defer exec.Close()

	c := xxljobtest.NewClient(exec.URL, "T", xxljobtest.V24)
	defer c.Close()
	_, err := c.Beat(t.Context())
	require.NoError(t, err)
	p := xxljobtest.Trigger(7, "h", 1021)
	p.LogDateTime, p.GlueUpdatetime = 1700000000123, 1699990000000
	_, err = c.Run(t.Context(), p)
	require.NoError(t, err)
	_, err = c.Kill(t.Context(), 7)
	require.NoError(t, err)
	_, err = c.IdleBeat(t.Context(), 7)
	require.NoError(t, err)
	env, lr, err := c.Log(t.Context(), 1700000000123, 1021, 1)
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	require.Equal(t, &xxljobtest.LogResult{FromLineNum: 1, ToLineNum: 2, LogContent: "a\nb\n"}, lr, "2.4 reads content")

	snapshot := func() []xxljobtest.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]xxljobtest.Request(nil), got...)
	}
	reqs := snapshot()
	require.Len(t, reqs, 5)
	for _, r := range reqs {
		require.Equal(t, "application/json;charset=UTF-8", r.Header.Get("Content-Type"))
		require.Equal(t, "T", r.Header.Get("XXL-JOB-ACCESS-TOKEN"))
	}
	require.Equal(t, `""`, string(reqs[0].Body))
	require.Equal(t, `{"jobId":7,"executorHandler":"h","executorParams":"","executorBlockStrategy":"SERIAL_EXECUTION","executorTimeout":0,"logId":1021,"logDateTime":1700000000123,"glueType":"BEAN","glueSource":"","glueUpdatetime":1699990000000,"broadcastIndex":0,"broadcastTotal":1}`, string(reqs[1].Body))
	require.Equal(t, `{"jobId":7}`, string(reqs[2].Body))
	require.Equal(t, `{"jobId":7}`, string(reqs[3].Body))
	require.Equal(t, `{"logDateTim":1700000000123,"logId":1021,"fromLineNum":1}`, string(reqs[4].Body))

	v34 := xxljobtest.NewClient(exec.URL, "", xxljobtest.V34)
	defer v34.Close()
	_, lr, err = v34.Log(t.Context(), 1, 1, 1)
	require.NoError(t, err)
	require.True(t, lr.IsEnd, "3.4 reads data")
	_, err = v34.Beat(t.Context())
	require.NoError(t, err)
	reqs = snapshot()
	last := reqs[len(reqs)-1]
	require.Empty(t, last.Body, "3.4 beat has no body")
	require.Empty(t, last.Header.Values("XXL-JOB-ACCESS-TOKEN"), "blank token not sent")

	main := xxljobtest.NewClient(exec.URL, "T", xxljobtest.Main)
	main.AppName = "app"
	defer main.Close()
	_, err = main.Run(t.Context(), p)
	require.NoError(t, err)
	_, _, err = main.Log(t.Context(), 1700000000123, 1021, 1)
	require.NoError(t, err)
	reqs = snapshot()
	run, log := reqs[len(reqs)-2], reqs[len(reqs)-1]
	require.Equal(t, "/trigger", run.Path, "main renames /run")
	require.Equal(t, "app", run.Header.Get("XXL-JOB-APPNAME"))
	require.Equal(t, "T", run.Header.Get("XXL-JOB-ACCESS-TOKEN"))
	require.Equal(t, `{"logId":1021,"logDateTime":1700000000123,"fromLineNum":1}`, string(log.Body), "main's LogRequest")
}

func TestPageLogGivesUp(t *testing.T) {
	t.Parallel()
	exec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A running job that never logs again: always "nothing new" after line 1.
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"fromLineNum":1}`) {
			io.WriteString(w, `{"code":200,"content":{"fromLineNum":1,"toLineNum":1,"logContent":"start\n","isEnd":false}}`)
			return
		}
		io.WriteString(w, `{"code":200,"content":{"fromLineNum":2,"toLineNum":1,"logContent":"","isEnd":false}}`)
	}))
	defer exec.Close()
	c := xxljobtest.NewClient(exec.URL, "", xxljobtest.V24)
	defer c.Close()
	res, err := c.PageLog(t.Context(), 1, 1, xxljobtest.PageOptions{Interval: time.Millisecond, MaxIdlePolls: 5})
	require.NoError(t, err)
	require.Equal(t, xxljobtest.PageResult{Content: "start\n", Polls: 6, GaveUp: true}, res)
}
