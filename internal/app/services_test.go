package app

import (
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/orderlock"
)

// The loader checks the delayed-task timeouts with its own copy of the
// close path's cancellation bound; it must be the closer's.
func TestConfigCancelBoundIsTheClosers(t *testing.T) {
	db, err := sqlx.Open("mysql", "root@tcp(127.0.0.1:1)/none") // never connected
	require.NoError(t, err)
	defer db.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, ttl := range []time.Duration{time.Second, 3 * time.Second, 4 * time.Second, 10 * time.Second, 7 * time.Minute} {
		locker, err := orderlock.New(orderlock.Config{Client: rdb, TTL: ttl})
		require.NoError(t, err)
		closer, err := orders.NewCloser(db, locker, orders.CloserConfig{})
		require.NoError(t, err)
		require.Equal(t, closer.CancelBound(), config.CloseCancelBound(ttl), "lock TTL %s", ttl)
	}
}
