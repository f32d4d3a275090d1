package sqlexec_test

import (
	"context"
	"database/sql/driver"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/sqlexec"
)

// After a failover the pool holds idle connections to the old primary, up
// and read-only. With rejectReadOnly each fails as driver.ErrBadConn and is
// discarded: InTx fails the transaction, InTxAgainOnStaleConn runs it again
// until a new connection reaches the new primary.
func TestInTxAgainOnStaleConn(t *testing.T) {
	ctx := context.Background()
	old := mariadbtest.Start(t, mariadbtest.Options{})
	fresh := mariadbtest.Start(t, mariadbtest.Options{})
	for _, s := range []*mariadbtest.Server{old, fresh} {
		require.NoError(t, s.Exec(ctx, "CREATE DATABASE stale", "CREATE TABLE stale.t (id INT PRIMARY KEY)"))
		require.NoError(t, s.CreateUser(ctx, "app", "pw", "stale")) // read_only does not stop root
	}
	// The "virtual IP": new connections go where target says.
	var target atomic.Value
	target.Store(old.Addr)
	mysql.RegisterDialContext("stale-vip", func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target.Load().(string))
	})
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "app", "pw", "stale-vip", "vip", "stale"
	cfg.RejectReadOnly = true
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Hour)
	// Four connections to the old primary, left idle in the pool.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _, _ = db.ExecContext(ctx, "SELECT SLEEP(0.2)") })
	}
	wg.Wait()
	require.Equal(t, 4, db.Stats().Idle)

	require.NoError(t, old.Exec(ctx, "SET GLOBAL read_only = 1"))
	target.Store(fresh.Addr)
	insert := func(id int) func(tx *sqlx.Tx) error {
		return func(tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO t (id) VALUES (?)", id)
			return err
		}
	}
	require.ErrorIs(t, sqlexec.InTx(ctx, db, insert(1)), driver.ErrBadConn, "a plain transaction takes a stale connection")
	require.NoError(t, sqlexec.InTxAgainOnStaleConn(ctx, db, insert(2)))
	check := sqlx.MustOpen("mysql", fresh.DSN("stale"))
	defer check.Close()
	var n int
	require.NoError(t, check.GetContext(ctx, &n, "SELECT COUNT(*) FROM t WHERE id = 2"))
	require.Equal(t, 1, n, "written on the new primary")
}
