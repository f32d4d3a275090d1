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
		{"unknown field", `{"bizUuid":"u1","handler":"noop","delayMs":1,"glueSource":"rm -rf /"}`, want{400, "", "unknown field"}},
		{"two objects", `{"bizUuid":"o1","handler":"noop","delayMs":1}{"bizUuid":"o2"}`, want{400, "", "after the JSON object"}},
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
