package sqlexec

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// errUnknownSystemVariable is MySQL's answer to @@wsrep_on: a server
// without Galera support at all.
const errUnknownSystemVariable = 1193

// galeraNodes caches, per connection pool, whether its server is a Galera
// node; a pool's server does not change kind while the pool lives.
var galeraNodes sync.Map // *sql.DB -> bool

// Galera reports whether db's server is a member of a Galera cluster
// (wsrep_on). Galera certifies write sets at commit but applies other
// nodes' writes asynchronously, so a read through one node can miss a
// transaction another node committed a moment ago; InCausalTx closes that
// gap where a decision depends on it. The answer is asked once per pool.
func Galera(ctx context.Context, db *sqlx.DB) (bool, error) {
	if v, ok := galeraNodes.Load(db.DB); ok {
		return v.(bool), nil
	}
	var on sql.NullInt64
	err := db.GetContext(ctx, &on, "SELECT @@wsrep_on")
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == errUnknownSystemVariable:
		on = sql.NullInt64{} // MySQL without Galera
	case err != nil:
		return false, fmt.Errorf("ask whether the server is a Galera node: %w", err)
	}
	galera := on.Valid && on.Int64 == 1
	galeraNodes.Store(db.DB, galera)
	return galera, nil
}

// InCausalTx is InTx for a transaction that must see every transaction the
// cluster committed before it began: on a Galera node (causal true) the
// transaction starts with wsrep_sync_wait set, which makes the node apply
// what it has received before START TRANSACTION returns. (Set inside a
// transaction, wsrep_sync_wait makes no read wait: the wait belongs to the
// start.) The session's setting goes back to the server default before fn
// runs, since the connection returns to the pool. Without causal it is
// InTx.
func InCausalTx(ctx context.Context, db *sqlx.DB, causal bool, fn func(tx *sqlx.Tx) error) error {
	if !causal {
		return InTx(ctx, db, fn)
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = 1"); err != nil {
		return fmt.Errorf("begin: wait for the cluster's writes (wsrep_sync_wait): %w", err)
	}
	tx, err := conn.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		// The connection may be broken; if not, it must not keep the wait.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION wsrep_sync_wait = DEFAULT")
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "SET SESSION wsrep_sync_wait = DEFAULT"); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("begin: reset wsrep_sync_wait: %w", err)
	}
	return runTx(tx, fn)
}

// syncWaitCausal is the wsrep_sync_wait a causal session sets: reads
// (1), UPDATE and DELETE (2) wait until the node has applied what the
// cluster committed before the statement.
const syncWaitCausal = 3

// CausalRead runs fn's reads (outside any transaction) so that they see
// every transaction the cluster committed before CausalRead was called: on
// a Galera node (Galera, asked once per pool) fn reads on one connection
// made causal (Causal); elsewhere fn reads on db, and it costs nothing. A
// read whose rows another node wrote and no transaction here will lock
// (the lines of an order placed through another node) needs it:
// certification guards writes, not plain reads.
func CausalRead(ctx context.Context, db *sqlx.DB, fn func(q sqlx.QueryerContext) error) error {
	galera, err := Galera(ctx, db)
	if err != nil {
		return err
	}
	if !galera {
		return fn(db)
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("causal read: %w", err)
	}
	defer conn.Close()
	restore, err := Causal(ctx, db, conn)
	if err != nil {
		return err
	}
	defer restore()
	return fn(conn)
}

// Causal makes the statements of conn, a connection of db's pool, wait
// until the node has applied what the cluster committed before each of
// them (wsrep_sync_wait: reads, UPDATE and DELETE), when db's server is a
// Galera node; elsewhere it changes nothing. A statement outside a
// transaction waits itself; in a transaction only its start waits (see
// InCausalTx). Call the returned function (never nil) before conn goes
// back to the pool: it gives the session the server's default again, or,
// when that fails, has the pool discard the connection.
func Causal(ctx context.Context, db *sqlx.DB, conn *sqlx.Conn) (restore func(), err error) {
	galera, err := Galera(ctx, db)
	if err != nil || !galera {
		return func() {}, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION wsrep_sync_wait = %d", syncWaitCausal)); err != nil {
		return func() {}, fmt.Errorf("wait for the cluster's writes (wsrep_sync_wait): %w", err)
	}
	return func() { resetSyncWait(ctx, conn) }, nil
}

// resetSyncWait gives conn's session the server's wsrep_sync_wait again,
// or, when that fails, has the pool discard the connection (a session that
// kept the wait would only be slower, but nothing should inherit it).
func resetSyncWait(ctx context.Context, conn *sqlx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait = DEFAULT"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
