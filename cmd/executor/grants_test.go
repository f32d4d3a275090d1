package main

import (
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// An operator verb run by a database user that may only read stops with
// the server's refusal and, on the same line, what to grant on which
// database, as migrate does.
func TestOperatorVerbsNameTheMissingGrant(t *testing.T) {
	db, env := tasksWorld(t)
	env["MYSQL_DSN"] = db.NewUser(t, "SELECT ON *")
	cfg, err := mysql.ParseDSN(env["MYSQL_DSN"])
	require.NoError(t, err)
	user := cfg.User

	for _, tc := range []struct {
		args          []string
		denied, table string
	}{
		{[]string{"demo-data"}, "CREATE", "order_job_demo_batch"},
		{[]string{"deadletter", "requeue", "DEMO1"}, "UPDATE", "order_dead_letter"},
		{[]string{"tasks", "purge"}, "DELETE", "job_delay_task"},
		{[]string{"tasks", "cancel", "t-pending"}, "UPDATE", "job_delay_task"},
		{[]string{"outbox", "requeue", "-all"}, "UPDATE", "order_outbox"},
	} {
		code, _, errOut := runCLI(t, env, tc.args...)
		require.Equal(t, 1, code, errOut)
		verb := strings.Join(tc.args[:min(2, len(tc.args))], " ")
		if tc.args[0] == "demo-data" {
			verb = "demo-data"
		}
		require.True(t, strings.HasPrefix(errOut, "executor "+verb+": "), errOut)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
		require.Contains(t, errOut, "Error 1142 (42000): "+tc.denied+" command denied to user '"+user+"'@", "the server's error is kept")
		require.Contains(t, errOut, "for table `"+db.Name+"`.`"+tc.table+"`; fix: grant "+tc.denied+" on database "+db.Name+
			" to the database user "+user+" (GRANT "+tc.denied+" ON `"+db.Name+"`.* TO '"+user+"'@'%'); ", errOut)
		require.Contains(t, errOut, "(docs/configuration.md#the-database-user)\n")
	}

}
