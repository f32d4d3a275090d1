package xxljob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

// These tests check the wire JSON field by field against fixtures written
// from the protocol document (testdata/*.json).

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return bytes.TrimSpace(b)
}

func closeOrders() xxljob.Handler {
	return xxljob.HandlerFunc(func(_ context.Context, req *xxljob.Request) error {
		req.Logf("line %d", 1)
		req.SetResult("closed 3 orders")
		return nil
	})
}

func TestWireTriggerParamFixture(t *testing.T) {
	t.Parallel()
	raw := fixture(t, "trigger_param.json")

	// The fake admin encodes a TriggerParam exactly like the admin.
	p := xxljobtest.TriggerParam{
		JobID: 7, ExecutorHandler: "orderTimeoutCloseJob", ExecutorBlockStrategy: "SERIAL_EXECUTION",
		LogID: 1021, LogDateTime: 1700000000123, GlueType: "BEAN", GlueUpdatetime: 1699990000000, BroadcastTotal: 1,
	}
	got, err := json.Marshal(p)
	require.NoError(t, err)
	require.Equal(t, string(raw), string(got))

	// The executor accepts the admin's bytes and calls back the fixture.
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"orderTimeoutCloseJob": closeOrders()}})
	env, err := b.client.Post(t.Context(), "run", raw)
	require.NoError(t, err)
	require.Equal(t, `{"code":200}`, string(env.Raw))

	cb := b.callback(t, 1021)
	var want []json.RawMessage
	require.NoError(t, json.Unmarshal(fixture(t, "callback.json"), &want))
	require.Equal(t, jsonKeys(t, want[0]), jsonKeys(t, cb.Raw))
	require.Equal(t, string(want[0]), string(cb.Raw))
}

func TestWireCallbackRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"h": closeOrders(), "quiet": okHandler("")}})
	p1, p2 := xxljobtest.Trigger(1, "h", nextLogID()), xxljobtest.Trigger(2, "quiet", nextLogID())
	b.run(t, p1)
	b.run(t, p2)
	b.callback(t, p1.LogID)
	b.callback(t, p2.LogID)

	var bodies [][]byte
	for _, r := range b.admin.Requests() {
		if strings.HasSuffix(r.Path, "/api/callback") {
			require.Equal(t, "application/json;charset=UTF-8", r.Header.Get("Content-Type"))
			require.Contains(t, r.Header, "Xxl-Job-Access-Token", "token header is always sent")
			bodies = append(bodies, r.Body)
		}
	}
	require.NotEmpty(t, bodies)
	wantKeys := jsonKeys(t, json.RawMessage(`{"logId":1,"logDateTim":1,"handleCode":200,"handleMsg":""}`))
	for _, body := range bodies {
		require.Equal(t, byte('['), body[0], "callback body is a JSON array: %s", body)
		var items []json.RawMessage
		require.NoError(t, json.Unmarshal(body, &items))
		for _, it := range items {
			keys := jsonKeys(t, it)
			var m map[string]any
			require.NoError(t, json.Unmarshal(it, &m))
			switch int64(m["logId"].(float64)) {
			case p1.LogID:
				require.Equal(t, wantKeys, keys)
				require.Equal(t, float64(p1.LogDateTime), m["logDateTim"])
				require.Equal(t, "closed 3 orders", m["handleMsg"])
			case p2.LogID:
				require.Equal(t, wantKeys[:3], keys, "a null handleMsg is omitted")
				require.Equal(t, float64(p2.LogDateTime), m["logDateTim"])
			}
			require.Equal(t, float64(200), m["handleCode"])
		}
	}
}

func TestWireLogResult(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{handlers: map[string]xxljob.Handler{"orderTimeoutCloseJob": closeOrders()}})
	env, err := b.client.Post(t.Context(), "run", fixture(t, "trigger_param.json"))
	require.NoError(t, err)
	require.Equal(t, 200, env.Code)
	b.callback(t, 1021)

	env, err = b.client.Post(t.Context(), "log", fixture(t, "log_param.json"))
	require.NoError(t, err)
	want := fixture(t, "log_result.json")
	require.Equal(t, jsonKeys(t, want), jsonKeys(t, env.Raw), "a 2.x answer carries the log once, under content")
	var wantEnv struct{ Content json.RawMessage }
	require.NoError(t, json.Unmarshal(want, &wantEnv))
	require.Equal(t, jsonKeys(t, wantEnv.Content), jsonKeys(t, env.Content))

	var lr, wantLR xxljobtest.LogResult
	require.NoError(t, json.Unmarshal(env.Content, &lr))
	require.NoError(t, json.Unmarshal(wantEnv.Content, &wantLR))
	require.Equal(t, wantLR.FromLineNum, lr.FromLineNum)
	require.False(t, lr.IsEnd)
	require.GreaterOrEqual(t, lr.ToLineNum, 5) // start, param, handler line, end, result (+ callback line later)
	require.Equal(t, lr.ToLineNum, strings.Count(lr.LogContent, "\n"))

	// A missing file: the exact answer of the doc.
	miss, err := b.client.Post(t.Context(), "log", []byte(`{"logDateTim":1700000000123,"logId":99999999,"fromLineNum":1}`))
	require.NoError(t, err)
	require.Equal(t, string(fixture(t, "log_result_missing.json")), string(miss.Raw))
}

func TestWireRegistryParam(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{cfg: func(c *xxljob.Config) {
		c.AppName, c.Address, c.IP, c.Port = "order-executor", "", "10.0.0.5", 9999 // default Address from IP and Port
	}})
	_, err := b.admin.WaitRegistrations(1, waitLong)
	require.NoError(t, err)
	want := fixture(t, "registry_param.json")
	for _, r := range b.admin.Requests() {
		if strings.HasSuffix(r.Path, "/xxl-job-admin/api/registry") {
			require.Equal(t, string(want), string(r.Body))
			require.Equal(t, "application/json;charset=UTF-8", r.Header.Get("Content-Type"))
			require.Equal(t, []string{""}, r.Header.Values("XXL-JOB-ACCESS-TOKEN"), "empty token header still sent")
			return
		}
	}
	t.Fatal("no registry request recorded")
}
