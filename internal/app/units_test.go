package app

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
	"github.com/orderjob/executor/internal/syncbuf"
)

// Open builds a unit per order table of order.sources, in order, each
// named by its source; a source that does not answer at start is logged
// and its units built all the same, so the others can close.
func TestOpenBuildsEveryUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, other := dbtest.New(t), dbtest.New(t)
	cfg, err := config.LoadWith(nil, sourcesEnv(t, home.DSN, nil,
		fmt.Sprintf(`[{name: a, dsn: %q, tables: "order_info, order_info_{1..2}"}, {name: b, dsn: %q, tables: order_info}, {name: gone, dsn: %q, tables: order_info}]`,
			home.DSN, other.DSN, deadDSN(t))))
	require.NoError(t, err)
	var logged syncbuf.Buffer
	d, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
	require.NoError(t, err)
	defer d.Close()
	var names []string
	for _, u := range d.HandlerDeps().Units {
		names = append(names, u.Source()+"/"+u.Table())
	}
	require.Equal(t, []string{"a/order_info", "a/order_info_1", "a/order_info_2", "b/order_info", "gone/order_info"}, names)
	require.Len(t, d.unitDBs, 3, "a pool per source")
	require.Contains(t, logged.String(), `msg="order source does not answer; its units fail until it does" source=gone`)
}

// deadDSN is a DSN of a port nothing answers on.
func deadDSN(t *testing.T) string {
	return fmt.Sprintf("root@tcp(%s)/x?timeout=1s", deadAddr(t))
}

// sourcesEnv is the environment of a process on home with order.sources
// sources (one line of YAML), a Redis prefix of the test's own and extra.
func sourcesEnv(t *testing.T, home string, extra map[string]string, sources string) func(string) (string, bool) {
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": home, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:", "ORDER_SOURCES": sources}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
