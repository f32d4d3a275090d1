package api

// Hostile input on the delayed-task API (the API port's request decoders).

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/handlers"
)

// Any body either decodes into a registration within the documented limits
// or fails with a message (and, where it can tell, the field at fault);
// nothing panics.
func FuzzDecodeRegistration(f *testing.F) {
	for _, s := range []string{
		`{"bizUuid":"order-timeout-1001","handler":"orderTimeoutClose","delayMs":60000,"payload":{"orderNo":"1001"},"maxRetry":5}`,
		`{"bizUuid":"a","handler":"h","executeTime":"2027-01-02T15:04:05+08:00"}`,
		`{"bizUuid":"a","handler":"h","delayMs":-1}`, `{"bizUuid":"a","handler":"h","delayMs":1e30}`,
		`{"bizUuid":"a","handler":"h","executeTime":"x","delayMs":1}`, `{"maxRetry":0}`, `{"bogus":1}`,
		``, `{`, `[]`, `null`, `{"payload":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
		`{"bizUuid":"a","handler":"h","delayMs":1}{}`, `{"bizUuid":"a","handler":"h","delayMs":1,"maxRetry":101}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/api/delay-tasks", strings.NewReader(string(body)))
		reg, field, err := decodeRegistration(w, r)
		if err != nil {
			if err.Error() == "" || (utf8.Valid(body) && !utf8.ValidString(err.Error())) {
				t.Fatalf("unclear error %q for %q", err, body)
			}
			switch field {
			case "", "bizUuid", "handler", "executeTime", "delayMs", "maxRetry", "payload":
			default:
				if !strings.Contains(err.Error(), field) {
					t.Fatalf("field %q not named in %q", field, err)
				}
			}
			return
		}
		if reg.BizUUID == "" || reg.Handler == "" {
			t.Fatalf("accepted without bizUuid or handler: %q", body)
		}
		if reg.Delay < 0 || reg.Delay > delay.MaxDelay {
			t.Fatalf("delay %v out of range for %q", reg.Delay, body)
		}
		if reg.MaxRetry < -1 || reg.MaxRetry > delay.MaxMaxRetry {
			t.Fatalf("maxRetry %d for %q", reg.MaxRetry, body)
		}
	})
}

func TestAPIHostileInput(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	hs, _ := apiServer(t, b)
	before := b.countStatus(t, delay.StatusPending)

	type want struct {
		status int
		field  string // "" when the answer names none
		text   string // in the error message
	}
	nested := `{"bizUuid":"n","handler":"noop","delayMs":1,"payload":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	cases := []struct {
		name, body string
		want       want
	}{
		{"nested payload", nested, want{400, "", "not valid JSON"}},
		{"body over 128 KiB", `{"bizUuid":"big","handler":"noop","delayMs":1,"payload":"` + strings.Repeat("x", MaxRegistrationBytes) + `"}`, want{413, "", "larger than"}},
		{"payload not UTF-8", "{\"bizUuid\":\"u8\",\"handler\":\"noop\",\"delayMs\":1,\"payload\":{\"orderNo\":\"\xff\"}}", want{400, "payload", "not UTF-8"}},
		{"payload over 60 KiB", `{"bizUuid":"p","handler":"noop","delayMs":1,"payload":"` + strings.Repeat("x", delay.MaxPayloadBytes) + `"}`, want{400, "payload", "at most"}},
		{"SQL in bizUuid", `{"bizUuid":"x'; DROP TABLE job_delay_task; --","handler":"noop","delayMs":1}`, want{400, "bizUuid", ""}},
		{"path in bizUuid", `{"bizUuid":"../../etc/passwd","handler":"noop","delayMs":1}`, want{400, "bizUuid", ""}},
		{"bizUuid .", `{"bizUuid":".","handler":"noop","delayMs":1}`, want{400, "bizUuid", `"." is a dot path segment`}},
		{"bizUuid ..", `{"bizUuid":"..","handler":"noop","delayMs":1}`, want{400, "bizUuid", `".." is a dot path segment`}},
		{"bizUuid 129 chars", `{"bizUuid":"` + strings.Repeat("a", delay.MaxBizUUIDLen+1) + `","handler":"noop","delayMs":1}`, want{400, "bizUuid", ""}},
		{"SQL in handler", `{"bizUuid":"h1","handler":"noop' OR '1'='1","delayMs":1}`, want{400, "handler", ""}},
		{"negative delay", `{"bizUuid":"d1","handler":"noop","delayMs":-1}`, want{400, "delayMs", "negative"}},
		{"huge delay", `{"bizUuid":"d2","handler":"noop","delayMs":9223372036854775807}`, want{400, "delayMs", "more than"}},
		{"delay overflow", `{"bizUuid":"d3","handler":"noop","delayMs":9223372036854775808}`, want{400, "delayMs", "expected int64"}},
		{"year 0001", `{"bizUuid":"t1","handler":"noop","executeTime":"0001-01-01T00:00:00Z"}`, want{400, "executeTime", "before 2000"}},
		{"year 9999", `{"bizUuid":"t2","handler":"noop","executeTime":"9999-12-31T23:59:59Z"}`, want{400, "executeTime", "ahead"}},
		{"maxRetry huge", `{"bizUuid":"m1","handler":"noop","delayMs":1,"maxRetry":2147483648}`, want{400, "maxRetry", ""}},
		{"maxRetry negative", `{"bizUuid":"m2","handler":"noop","delayMs":1,"maxRetry":-1}`, want{400, "maxRetry", ""}},
		{"a field in another case", `{"bizUuid":"c1","handler":"noop","delayMs":1,"BizUuid":"c2"}`, want{400, "", `unknown field "BizUuid"`}},
		{"a field twice", `{"bizUuid":"c3","handler":"noop","delayMs":1,"handler":"http:svc/x"}`, want{400, "handler", "handler is given twice"}},
		{"unknown field", `{"bizUuid":"u1","handler":"noop","delayMs":1,"glueSource":"rm -rf /"}`, want{400, "", "unknown field"}},
		{"two objects", `{"bizUuid":"o1","handler":"noop","delayMs":1}{"bizUuid":"o2"}`, want{400, "", "after the JSON object"}},
		{"a bracket after", `{"bizUuid":"o3","handler":"noop","delayMs":1}]`, want{400, "", "after the JSON object"}},
		{"a brace after", `{"bizUuid":"o4","handler":"noop","delayMs":1}}`, want{400, "", "after the JSON object"}},
	}
	for _, tc := range cases {
		start := time.Now()
		a := call(t, hs, "POST", "/api/delay-tasks", tc.body)
		require.Equal(t, tc.want.status, a.status, "%s: %.300s", tc.name, a.raw)
		require.NotEmpty(t, a.body["error"], tc.name)
		if tc.want.field != "" {
			require.Equal(t, tc.want.field, a.body["field"], "%s: %.300s", tc.name, a.raw)
		}
		require.Contains(t, a.body["error"], tc.want.text, tc.name)
		require.Less(t, time.Since(start), 3*time.Second, tc.name)
	}
	require.Equal(t, before, b.countStatus(t, delay.StatusPending), "a refused registration was stored")

	// Query parameters and path values are data: bound, never SQL.
	for _, q := range []string{"handler=" + url.QueryEscape("x' OR '1'='1"), "before=" + url.QueryEscape("1 OR 1=1"),
		"status=" + url.QueryEscape("PENDING' --"), "limit=1001", "limit=-1", "before=-5", "sort=id"} {
		a := call(t, hs, "GET", "/api/delay-tasks?"+q, "")
		if a.status == http.StatusOK {
			require.Empty(t, a.body["tasks"], q)
		} else {
			require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", q, a.raw)
			require.NotEmpty(t, a.body["field"], q)
		}
	}
	for _, p := range []string{"%27%20OR%20%271%27%3D%271", "..%2F..%2Fstats", strings.Repeat("z", 5000)} {
		a := call(t, hs, "GET", "/api/delay-tasks/"+p, "")
		require.Equal(t, http.StatusNotFound, a.status, "%s: %s", p, a.raw)
	}
	var n int
	require.NoError(t, b.db.Get(&n, "SELECT COUNT(*) FROM job_delay_task"))
	require.Zero(t, n)
}

// An orderTimeoutClose task must name its order: before, payload null,
// "hello" or {"x":1} were accepted (201) and failed only when they ran.
// The executor registers handlers.ValidateOrderPayload with the task type
// (internal/app); the same here, through the API.
func TestAPIRefusesOrderTaskWithoutOrder(t *testing.T) {
	t.Parallel()
	b := setupDelay(t)
	d := b.dispatcher(t, map[string]delay.HandlerFunc{"noop": noopTask, delay.OrderTimeoutCloseHandler: noopTask}, func(c *delay.Config) {
		c.PayloadValidators = map[string]delay.PayloadValidator{delay.OrderTimeoutCloseHandler: handlers.ValidateOrderPayload}
	})
	srv := New(Config{Token: "tok"})
	srv.MountDelayTasks(d.Client())
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	reg := func(biz, payload string) string {
		return `{"bizUuid":"` + biz + `","handler":"orderTimeoutClose","delayMs":60000` + payload + `}`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		field, msg string
	}{
		{"no payload", reg("p1", ""), 400, "payload", `delay: payload: must be a JSON object {"orderNo": "..."}, not null`},
		{"null", reg("p2", `,"payload":null`), 400, "payload", `delay: payload: must be a JSON object {"orderNo": "..."}, not null`},
		{"a string", reg("p3", `,"payload":"hello"`), 400, "payload", `delay: payload: must be a JSON object {"orderNo": "..."}, not "hello"`},
		{"an array", reg("p4", `,"payload":[{"orderNo":"1"}]`), 400, "payload", `delay: payload: must be a JSON object {"orderNo": "..."}, not [{"orderNo":"1"}]`},
		{"no orderNo", reg("p5", `,"payload":{"x":1}`), 400, "payload.orderNo", "delay: payload.orderNo: is required (the order to close)"},
		{"orderNo case", reg("p6", `,"payload":{"orderno":"1001"}`), 400, "payload.orderNo", "delay: payload.orderNo: is required (the order to close)"},
		{"orderNo a number", reg("p7", `,"payload":{"orderNo":1001}`), 400, "payload.orderNo", "delay: payload.orderNo: must be a string, not 1001"},
		{"orderNo null", reg("p8", `,"payload":{"orderNo":null}`), 400, "payload.orderNo", "delay: payload.orderNo: must be a string, not null"},
		{"orderNo empty", reg("p9", `,"payload":{"orderNo":""}`), 400, "payload.orderNo", "delay: payload.orderNo: is empty"},
		{"orderNo blank", reg("p10", `,"payload":{"orderNo":"  "}`), 400, "payload.orderNo", "delay: payload.orderNo: is empty"},
		{"orderNo 65 chars", reg("p11", `,"payload":{"orderNo":"`+strings.Repeat("9", 65)+`"}`), 400, "payload.orderNo", "delay: payload.orderNo: is 65 characters, at most 64 (order_info.order_no)"},
		{"orderNo 64 chars", reg("ok1", `,"payload":{"orderNo":"`+strings.Repeat("订", 64)+`"}`), 201, "", ""},
		{"orderNo and more", reg("ok2", `,"payload":{"orderNo":"1001","note":"x"}`), 201, "", ""},
		{"other handler, any payload", `{"bizUuid":"ok3","handler":"noop","delayMs":60000,"payload":"hello"}`, 201, "", ""},
	} {
		a := call(t, hs, "POST", "/api/delay-tasks", tc.body)
		require.Equal(t, tc.status, a.status, "%s: %s", tc.name, a.raw)
		if tc.status == 400 {
			require.Equal(t, tc.field, a.body["field"], tc.name)
			require.Equal(t, tc.msg, a.body["error"], tc.name)
		}
	}
	var n int
	require.NoError(t, b.db.Get(&n, "SELECT COUNT(*) FROM job_delay_task"))
	require.Equal(t, 3, n, "only the three good registrations are stored")
}
