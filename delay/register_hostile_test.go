package delay

import (
	"context"
	"errors"
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
