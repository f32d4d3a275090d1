package mariadbtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/mariadbtest"
)

// A private server keeps committed rows across a crash and a clean restart,
// on the same port, and is unreachable while stopped.
func TestCrashAndRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := mariadbtest.Start(t, mariadbtest.Options{})
	db, _ := s.NewDB(t, "crash_test")
	_, err := db.ExecContext(ctx, "INSERT INTO inventory (sku_id, available, locked) VALUES (1, 10, 0)")
	require.NoError(t, err)

	s.Kill()
	require.False(t, s.Running())
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	require.Error(t, db.PingContext(pctx), "a killed server does not answer")
	cancel()

	s.Start()
	var n int
	require.NoError(t, db.GetContext(ctx, &n, "SELECT available FROM inventory WHERE sku_id = 1"))
	require.Equal(t, 10, n, "the committed row survived the crash")

	s.Restart(false)
	require.NoError(t, db.GetContext(ctx, &n, "SELECT available FROM inventory WHERE sku_id = 1"))
	require.Equal(t, 10, n)
}

// Env reaches the server process: under libfaketime its clock is shifted.
func TestShiftedClock(t *testing.T) {
	t.Parallel()
	const lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("libfaketime missing (apt-get install faketime): %v", err)
	}
	s := mariadbtest.Start(t, mariadbtest.Options{Env: []string{"LD_PRELOAD=" + lib, "FAKETIME=+1d", "FAKETIME_DONT_FAKE_MONOTONIC=1"}})
	db, _ := s.NewDB(t, "clock_test")
	var skew float64
	require.NoError(t, db.GetContext(context.Background(), &skew, "SELECT TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(), ?) ", time.Now().UTC()))
	require.InDelta(t, -86400, skew, 5, "the server's clock is a day ahead of ours")
}

// A server starting deletes the #sql files of its tmpdir; those of a
// server already running (the shared one, or another test's) must not be
// among them, or its temporary tables lose their files: dropping one then
// fails with "Error on delete of '/tmp/#sql-temptable-...' (Errcode: 2)",
// as an internal temporary table did in CI.
func TestStartLeavesOthersTemporaryTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := mariadbtest.Start(t, mariadbtest.Options{})
	db, _ := a.NewDB(t, "tmpdir_test")
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "CREATE TEMPORARY TABLE scratch (n INT) ENGINE=Aria")
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, "INSERT INTO scratch VALUES (1)")
	require.NoError(t, err)

	mariadbtest.Start(t, mariadbtest.Options{})
	_, err = conn.ExecContext(ctx, "DROP TEMPORARY TABLE scratch")
	require.NoError(t, err, "the temporary table's files are still there")
}
