package delay

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
)

// NewDispatcher and NewClient refuse bad settings with messages that name
// the setting and the value, every problem at once, before anything
// connects.
func TestNewDispatcherRefusals(t *testing.T) {
	t.Parallel()
	db := dbtest.Unconnected(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	nop := func(context.Context, *Task) error { return nil }
	nopBatch := func(context.Context, []*Task) []error { return nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative duration", Config{PollInterval: -time.Second}, "delay: PollInterval -1s is negative"},
		{"batch size", Config{BatchSize: 1001}, "delay: BatchSize 1001 is not in 1..1000"},
		{"workers", Config{Workers: -1}, "delay: Workers -1 is below 1"},
		{"handler batch size", Config{HandlerBatchSize: 501}, "delay: HandlerBatchSize 501 is not in 1..BatchSize (500)"},
		{"handler name", Config{Handlers: map[string]HandlerFunc{"1bad": nop}}, "delay: handler name \"1bad\" is not a letter then letters, digits, . _ -"},
		{"nil handler", Config{Handlers: map[string]HandlerFunc{"x": nil}}, "delay: handler \"x\" is nil"},
		{"bad name, nil", Config{Handlers: map[string]HandlerFunc{"http:x": nil}}, "delay: handler name \"http:x\" is not a letter then letters, digits, . _ -\ndelay: handler \"http:x\" is nil"},
		{"nil batch handler", Config{BatchHandlers: map[string]BatchHandlerFunc{"x": nil}}, "delay: batch handler \"x\" is nil"},
		{"in both", Config{Handlers: map[string]HandlerFunc{"x": nop}, BatchHandlers: map[string]BatchHandlerFunc{"x": nopBatch}}, "delay: handler \"x\" is in both Handlers and BatchHandlers"},
		{"validator without handler", Config{PayloadValidators: map[string]PayloadValidator{"x": func(json.RawMessage) error { return nil }}}, "delay: payload validator for \"x\", which is not in Handlers or BatchHandlers"},
		{"nil validator", Config{Handlers: map[string]HandlerFunc{"x": nop}, PayloadValidators: map[string]PayloadValidator{"x": nil}}, "delay: payload validator \"x\" is nil"},
		{"service", Config{Services: map[string]string{"pay": "ftp://pay"}}, "delay: service pay: base URL \"ftp://pay\" is not http(s)://host[:port][/path]"},
		{"timeouts", Config{RunningTimeout: 120 * time.Second, HandlerTimeout: 120 * time.Second}, "delay: HandlerTimeout 2m0s + HandlerGrace 0s exceeds 90% of RunningTimeout 2m0s: an attempt may still run when its task is recovered and run again; raise RunningTimeout to at least 2m14s or lower HandlerTimeout to at most 1m48s"},
		{"retries", Config{BackoffBase: time.Hour, BackoffMax: time.Minute}, "delay: retries: backoff base 1h0m0s is above its maximum 1m0s"},
		{"not now", Config{NotNowBackoff: time.Minute, NotNowBackoffMax: time.Second}, "delay: not-now waits (NotNowBackoff, NotNowBackoffMax): backoff base 1m0s is above its maximum 1s"},
		{"all at once", Config{BatchSize: 1001, Workers: -1, Services: map[string]string{"pay": "ftp://pay"}}, "delay: BatchSize 1001 is not in 1..1000\ndelay: Workers -1 is below 1\ndelay: service pay: base URL \"ftp://pay\" is not http(s)://host[:port][/path]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDispatcher(db, rdb, tc.cfg)
			require.EqualError(t, err, tc.want)
		})
	}
	_, err := NewDispatcher(nil, rdb, Config{})
	require.EqualError(t, err, "delay: NewDispatcher needs a database")
	_, err = NewDispatcher(db, nil, Config{})
	require.EqualError(t, err, "delay: NewDispatcher needs Redis or Config.Timer")
	_, err = NewClient(nil, rdb, ClientConfig{})
	require.EqualError(t, err, "delay: NewClient needs a database")
	_, err = NewDispatcher(db, rdb, Config{})
	require.NoError(t, err, "the defaults are valid")
	_, err = NewDispatcher(db, rdb, Config{RunningTimeout: 120 * time.Second, HandlerTimeout: 60 * time.Second})
	require.NoError(t, err, "a handler timeout within 90% of RunningTimeout")
}
