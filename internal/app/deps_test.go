package app

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// The process log writes durations as text, in both formats, and masks the
// secrets of URLs in the start-up configuration line.
func TestProcessLogDurationsAndURLs(t *testing.T) {
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
		v, ok := map[string]string{
			"XXL_JOB_ADMIN_ADDRESSES": "http://u:adminpw@admin:8080/xxl-job-admin",
			"DELAY_SERVICES":          "orders=http://svc:p4ss@svc:8080",
			"ORDER_PAYMENT_CLOSE_URL": "https://pay/close?token=SECRET123",
			"REDIS_SENTINEL_PASSWORD": "sentinelpw",
		}[k]
		return v, ok
	})
	require.NoError(t, err)
	for _, format := range []string{"json", "text"} {
		cfg.Log.Format = format
		var buf bytes.Buffer
		log := NewLogger(cfg, &buf)
		log.Info("tick", "interval", 30*time.Second, "config", cfg)
		out := buf.String()
		require.Contains(t, out, "30s", format)
		require.NotContains(t, out, "30000000000", format)
		for _, secret := range []string{"adminpw", "p4ss", "SECRET123", "sentinelpw"} {
			require.NotContains(t, out, secret, format)
		}
		require.Contains(t, out, "admin:8080", format)
	}
}

// A redis.db above the server's `databases` setting is refused at start,
// naming the key, instead of leaving the executor never ready; a database
// the server has, and database 0, pass.
func TestCheckRedisDB(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr()
	probe := redis.NewClient(&redis.Options{Addr: addr})
	kv, err := probe.ConfigGet(ctx, "databases").Result()
	require.NoError(t, probe.Close())
	require.NoError(t, err)
	n, err := strconv.Atoi(kv["databases"])
	require.NoError(t, err)
	refused := func(db int) string {
		return fmt.Sprintf("redis.db: %d: the server refused to select it (it has %d databases, 0 to %d): ERR DB index is out of range", db, n, n-1)
	}
	for _, tc := range []struct {
		db   int
		want string
	}{
		{0, ""},
		{n - 1, ""},
		{n, refused(n)},
		{1 << 20, refused(1 << 20)},
	} {
		cfg := config.Redis{Addr: []string{addr}, Mode: "single", DB: tc.db}
		rdb, err := NewRedis(cfg)
		require.NoError(t, err)
		err = CheckRedisDB(ctx, cfg, rdb)
		require.NoError(t, rdb.Close())
		if tc.want == "" {
			require.NoError(t, err, tc.db)
			continue
		}
		require.EqualError(t, err, tc.want)
	}
	// A server that does not answer is readiness's business, not a refusal.
	cfg := config.Redis{Addr: []string{"127.0.0.1:1"}, Mode: "single", DB: 16}
	rdb, err := NewRedis(cfg)
	require.NoError(t, err)
	defer rdb.Close()
	require.NoError(t, CheckRedisDB(ctx, cfg, rdb))
}

// TestOpenDBNamesAnUnknownTimeZone: a zone name the server does not know
// fails every connection with a bare "Unknown or incorrect time zone";
// OpenDB names the setting and the two ways out.
func TestOpenDBNamesAnUnknownTimeZone(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	env := map[string]string{"MYSQL_DSN": db.DSN, "MYSQL_TIME_ZONE": "Fh/Nowhere"}
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	_, err = OpenDB(context.Background(), cfg)
	require.ErrorContains(t, err, "mysql: ping: mysql.timeZone Fh/Nowhere: the server knows no zone of that name")
	require.ErrorContains(t, err, "set an offset such as '+08:00'")
	require.ErrorContains(t, err, "Error 1298")

	env["MYSQL_TIME_ZONE"] = "+08:00"
	cfg, err = config.LoadWith(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	got, err := OpenDB(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, got.Close())
}

// A server that takes the connection and never answers (a firewall that
// drops packets, a wrong port): OpenDB gives up after its wait and names
// the address and what to check, not only "context deadline exceeded".
func TestOpenDBNamesAServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c // accepted, never written to
		}
	}()
	defer func() {
		ln.Close()
		for c := range held {
			c.Close()
		}
	}()
	cfg, err := config.LoadWith(nil, func(k string) (string, bool) {
		v, ok := map[string]string{"MYSQL_DSN": "app:Secret99@tcp(" + ln.Addr().String() + ")/shop"}[k]
		return v, ok
	})
	require.NoError(t, err)
	_, err = openDB(context.Background(), cfg, 300*time.Millisecond)
	require.ErrorIs(t, err, ErrNoAnswer)
	require.ErrorContains(t, err, "mysql: tcp "+ln.Addr().String()+": no answer within 300ms: check that the server is up")
	require.NotContains(t, err.Error(), "Secret99")
}
