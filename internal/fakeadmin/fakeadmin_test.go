package fakeadmin_test

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

	"github.com/orderjob/executor/internal/fakeadmin"
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
	a := fakeadmin.New(t, fakeadmin.Options{Token: "T"})
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

	want := fakeadmin.Registry{RegistryGroup: "EXECUTOR", RegistryKey: "app", RegistryValue: "http://10.0.0.5:9999/"}
	require.Equal(t, []fakeadmin.Registry{want}, a.Registrations())
	require.Equal(t, []fakeadmin.Registry{want}, a.Removals())

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
	a := fakeadmin.New(t, fakeadmin.Options{ContextPath: "ctx", Version: fakeadmin.V34})
	require.True(t, strings.HasSuffix(a.URL, "/ctx"))
	reg := `{"registryGroup":"EXECUTOR","registryKey":"app","registryValue":"v"}`

	_, body := post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, `{"code":200,"msg":null,"data":null}`, body, "3.4 envelope")
	_, body = post(t, a.URL+"/api/registry", "", "")
	require.Contains(t, body, `"code":500`, "3.4 rejects a blank body")

	a.SetMode(fakeadmin.Down503)
	code, _ := post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, 503, code)
	a.SetMode(fakeadmin.DownClose)
	code, _ = post(t, a.URL+"/api/registry", "", reg)
	require.Equal(t, 0, code, "connection dropped")
	a.SetMode(fakeadmin.Up)
	regs, err := a.WaitRegistrations(1, time.Second)
	require.NoError(t, err)
	require.Len(t, regs, 1, "nothing recorded while down")
}

// TestClientSendsAdminRequests checks the admin → executor requests.
func TestClientSendsAdminRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []fakeadmin.Request
	exec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, fakeadmin.Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		mu.Unlock()
		if r.URL.Path == "/log" {
			io.WriteString(w, `{"code":200,"content":{"fromLineNum":1,"toLineNum":2,"logContent":"a\nb\n","isEnd":false},"data":{"fromLineNum":1,"toLineNum":0,"logContent":"","isEnd":true}}`)
			return
		}
		io.WriteString(w, `{"code":200}`)
	}))
	defer exec.Close()

	c := fakeadmin.NewClient(exec.URL, "T", fakeadmin.V24)
	defer c.Close()
	_, err := c.Beat(t.Context())
	require.NoError(t, err)
	p := fakeadmin.Trigger(7, "h", 1021)
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
	require.Equal(t, &fakeadmin.LogResult{FromLineNum: 1, ToLineNum: 2, LogContent: "a\nb\n"}, lr, "2.4 reads content")

	snapshot := func() []fakeadmin.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]fakeadmin.Request(nil), got...)
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

	v34 := fakeadmin.NewClient(exec.URL, "", fakeadmin.V34)
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
	c := fakeadmin.NewClient(exec.URL, "", fakeadmin.V24)
	defer c.Close()
	res, err := c.PageLog(t.Context(), 1, 1, fakeadmin.PageOptions{Interval: time.Millisecond, MaxIdlePolls: 5})
	require.NoError(t, err)
	require.Equal(t, fakeadmin.PageResult{Content: "start\n", Polls: 6, GaveUp: true}, res)
}
