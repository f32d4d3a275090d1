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
	dead := deadAddr(t)
	_, prefix := redistest.Client(t)
	env := map[string]string{"MYSQL_DSN": home.DSN, "REDIS_ADDR": redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX": prefix,
		"DELAY_KEY_PREFIX": prefix + "delay:",
		"ORDER_SOURCES": fmt.Sprintf(`[{name: a, dsn: %q, tables: "order_info, order_info_{1..2}"}, {name: b, dsn: %q, tables: order_info}, {name: gone, dsn: "root@tcp(%s)/x?timeout=1s", tables: order_info}]`,
			home.DSN, other.DSN, dead)}
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
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
