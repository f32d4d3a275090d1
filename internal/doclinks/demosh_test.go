package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

// make demo, as the README shows it: it says it is building before the
// build, sums the schema up in one line (migrate's statements go to the file
// it names) and prints the run log with no JSON process-log line in it.
func TestDemoScriptPrintsARunLogForPeople(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the executor")
	}
	db := dbtest.NewEmpty(t)
	_, prefix := redistest.Client(t)
	root := filepath.Join("..", "..")
	cmd := exec.Command("bash", filepath.Join("scripts", "demo.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MYSQL_DSN="+dbtest.ServerDSN(), "DEMO_DATABASE="+db.Name, "DEMO_ORDERS=300",
		"REDIS_ADDR="+redistest.Addr(), "ORDER_CLOSE_LOCK_KEY_PREFIX="+prefix, "DELAY_KEY_PREFIX="+prefix+"delay:",
		"LOG_LEVEL=", "LOG_FORMAT=")
	out, err := cmd.CombinedOutput()
	t.Logf("make demo:\n%s", out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "demo database: "+db.Name, lines[0])
	require.Equal(t, "building bin/executor (the first build takes a few minutes)…", lines[1])
	require.Regexp(t, `^schema: schema is up to date.* \(every statement: logs/demo-migrate\.log\)$`, lines[2])
	require.Regexp(t, `^created 300 orders \(ids 1-300\): \d+ due`, lines[3])
	require.Equal(t, "running orderTimeoutCloseJob once; its run log:", lines[4])
	for _, l := range lines[5:] {
		require.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[(INFO|WARN|ERROR)\] `, l, "a run-log line, not a process-log record")
	}
	require.Regexp(t, `\] scanned=\d+ closed=\d+ skipped_paid=0 skipped_locked=0 dead_lettered=0 seconds=`, string(out))
	migrateLog, err := os.ReadFile(filepath.Join(root, "logs", "demo-migrate.log"))
	require.NoError(t, err)
	require.Contains(t, string(migrateLog), "CREATE TABLE IF NOT EXISTS order_info")
}
