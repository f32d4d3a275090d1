package delaytest

import (
	"context"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
)

// The killed-dispatcher tests: a dispatcher dies after its handler acted
// but before it recorded the result, which leaves the task RUNNING; a
// second dispatcher with RunningTimeout RecoveryRunningTimeout (and
// HandlerTimeout RecoveryHandlerTimeout) recovers it once AgeTask has moved
// it PastRunningTimeout back, and runs it again.
const (
	RecoveryRunningTimeout = 3 * time.Second
	RecoveryHandlerTimeout = time.Second
	PastRunningTimeout     = 4 * time.Second
)

// Dying is the database handle of the dispatcher that dies: a handle of its
// own on the test's database, which Die closes.
type Dying struct {
	DB    *sqlx.DB
	acted chan struct{}
}

// NewDying opens a handle on the database of dsn for the dispatcher that
// dies.
func NewDying(t testing.TB, dsn string) *Dying {
	t.Helper()
	db, err := sqlx.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &Dying{DB: db, acted: make(chan struct{})}
}

// Die is what the dying dispatcher's handler calls once it acted: the
// process "dies", its result write cannot reach the database. Call it once.
func (d *Dying) Die() {
	d.DB.Close()
	close(d.acted)
}

// Stop waits until the handler called Die, then stops p (within 5s).
func (d *Dying) Stop(t testing.TB, p Part) {
	t.Helper()
	<-d.acted
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
}
