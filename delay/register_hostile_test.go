package delay

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"path"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An HTTP task's path must stay under its service's base URL: "http:svc" +
// a path with dot segments would make the dispatcher POST (with the service
// token) to another path of that host, outside the configured base path.
func TestRegisterHostileServicePathEscape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(context.Context, *Task) error { return nil }
	cfg := b.fastConfig(map[string]HandlerFunc{"noop": noop})
	cfg.Services = map[string]string{"orders": "http://127.0.0.1:1/internal/orders"}
	d := newDispatcher(t, cfg)
	for i, h := range []string{
		"http:orders/../../admin/drop",
		"http:orders/close/../../../admin",
		"http:orders/%2e%2e/%2e%2e/admin",
		"http:orders/./close",
		"http:orders/..;/admin",
	} {
		_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "esc-" + strconv.Itoa(i), Handler: h, Delay: time.Minute})
		var inv *InvalidError
		require.True(t, errors.As(err, &inv), "handler %q accepted (err %v): it would be called outside http://127.0.0.1:1/internal/orders", h, err)
		require.Equal(t, "handler", inv.Field)
	}
	// Plain paths under the base stay accepted.
	_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "ok-1", Handler: "http:orders/close?x=1", Delay: time.Minute})
	require.NoError(t, err)
}

// A bizUuid names its task in URL paths (/api/delay-tasks/{bizUuid}, the
// console's task page): "." and ".." are dot segments that clients and the
// router remove, so such a task could not be opened or cancelled. They are
// refused; every other bizUuid of the alphabet stands in a path segment as
// it is.
func TestRegisterHostileBizUUID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(context.Context, *Task) error { return nil }
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"noop": noop}))
	for _, tc := range []struct{ biz, msg string }{
		{".", `"." is a dot path segment: it cannot appear in a URL path`},
		{"..", `".." is a dot path segment: it cannot appear in a URL path`},
		{"...", ""},
		{".a", ""},
		{"a..", ""},
		{"a:b@c-_.d", ""},
	} {
		_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: tc.biz, Handler: "noop", Delay: time.Minute})
		if tc.msg == "" {
			require.NoError(t, err, tc.biz)
			// It round-trips through a URL path segment unchanged.
			u, perr := url.Parse("http://h/api/delay-tasks/" + url.PathEscape(tc.biz))
			require.NoError(t, perr)
			require.Equal(t, "/api/delay-tasks/"+tc.biz, path.Clean(u.Path), tc.biz)
			continue
		}
		var inv *InvalidError
		require.True(t, errors.As(err, &inv), "%s accepted (err %v)", tc.biz, err)
		require.Equal(t, "bizUuid", inv.Field, tc.biz)
		require.Equal(t, tc.msg, inv.Msg, tc.biz)
	}
}

// A payload validator registered with a handler refuses that handler's bad
// payloads at registration, naming the field; other handlers' payloads are
// not its business.
func TestRegisterPayloadValidator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(context.Context, *Task) error { return nil }
	cfg := b.fastConfig(map[string]HandlerFunc{"noop": noop, "typed": noop})
	cfg.PayloadValidators = map[string]PayloadValidator{
		"typed": func(p json.RawMessage) error {
			switch string(p) {
			case `"bad"`:
				return &InvalidError{Field: "payload.kind", Msg: "is bad"}
			case `"odd"`:
				return errors.New("is odd")
			}
			return nil
		},
	}
	d := newDispatcher(t, cfg)
	for _, tc := range []struct {
		biz, handler, payload, field, msg string
	}{
		{"t1", "typed", "bad", "payload.kind", "is bad"},
		{"t2", "typed", "odd", "payload", "is odd"},
		{"t3", "typed", "good", "", ""},
		{"t4", "noop", "bad", "", ""},
	} {
		_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: tc.biz, Handler: tc.handler, Payload: tc.payload, Delay: time.Minute})
		if tc.field == "" {
			require.NoError(t, err, tc.biz)
			continue
		}
		var inv *InvalidError
		require.True(t, errors.As(err, &inv), "%s accepted (err %v)", tc.biz, err)
		require.Equal(t, tc.field, inv.Field, tc.biz)
		require.Equal(t, tc.msg, inv.Msg, tc.biz)
	}
}

// json.Valid takes a string holding bytes that are not UTF-8, which
// payload_json (utf8mb4) refuses: the INSERT failed with Error 1366, a 500
// on the API. Such a payload is now an invalid registration, in a
// transaction or not, and nothing is stored.
func TestRegisterPayloadNotUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(context.Context, *Task) error { return nil }
	d := newDispatcher(t, b.fastConfig(map[string]HandlerFunc{"noop": noop}))
	for i, p := range []any{json.RawMessage("{\"orderNo\":\"\xff\xfe\"}"), []byte("\"a\xc3\""), json.RawMessage("[\"\xed\xa0\x80\"]")} {
		_, _, err := d.Client().Register(context.Background(), Registration{BizUUID: "utf8-" + strconv.Itoa(i), Handler: "noop", Delay: time.Minute, Payload: p})
		var inv *InvalidError
		require.True(t, errors.As(err, &inv), "payload %q: %v", p, err)
		require.Equal(t, "payload", inv.Field)
		require.Equal(t, "delay: payload: is not valid JSON: a string holds bytes that are not UTF-8", inv.Error())
	}
	var n int
	require.NoError(t, b.db.Get(&n, `SELECT COUNT(*) FROM job_delay_task`))
	require.Zero(t, n)
	// Escapes are text: a lone surrogate written \ud800, a NUL, an emoji.
	_, created, err := d.Client().Register(context.Background(), Registration{BizUUID: "utf8-ok", Handler: "noop", Delay: time.Minute,
		Payload: json.RawMessage(`{"x":"\ud800\u0000😀"}`)})
	require.NoError(t, err)
	require.True(t, created)
}
