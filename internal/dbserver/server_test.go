package dbserver

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// Each server kind gives the numbers that depend on it their own meaning;
// the rest classify alike everywhere.
func TestServerKind(t *testing.T) {
	t.Parallel()
	my := func(n uint16, msg string) error {
		return fmt.Errorf("close page: %w", &mysql.MySQLError{Number: n, Message: msg})
	}
	const (
		inactive = "The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior."
		trigger  = "Referenced trigger 'tr_a' for the given action time and event type does not exist"
	)
	// everywhere: one meaning on every server; tidb: TiDB's (and an
	// unknown server's) meaning, a database error elsewhere.
	everywhere := func(k ErrorKind) map[Server]ErrorKind {
		return map[Server]ErrorKind{ServerTiDB: k, ServerUnknown: k, ServerMariaDB: k, ServerMySQL: k}
	}
	tidb := func(k ErrorKind) map[Server]ErrorKind {
		return map[Server]ErrorKind{ServerTiDB: k, ServerUnknown: k, ServerMariaDB: KindDatabase, ServerMySQL: KindDatabase}
	}
	for _, tc := range []struct {
		name  string
		err   error
		kinds map[Server]ErrorKind
	}{
		{"4031 from MySQL 8: idle disconnect", my(4031, inactive),
			map[Server]ErrorKind{ServerMySQL: KindConnection, ServerMariaDB: KindDatabase, ServerTiDB: KindDatabase, ServerUnknown: KindConnection}},
		{"4031 from MariaDB: missing trigger", my(4031, trigger),
			map[Server]ErrorKind{ServerMySQL: KindConnection, ServerMariaDB: KindDatabase, ServerTiDB: KindDatabase, ServerUnknown: KindDatabase}},
		{"TiDB 8022 KV error safe to retry", my(8022, "Error: KV error safe to retry"), tidb(KindContention)},
		{"TiDB 8028 schema changed", my(8028, "Information schema is changed during the execution of the statement"), tidb(KindContention)},
		{"TiDB 9007 write conflict", my(9007, "Write conflict, txnStartTS=1, conflictStartTS=2"), tidb(KindContention)},
		{"TiDB 9005 region unavailable", my(9005, "Region is unavailable"), tidb(KindConnection)},
		{"2013 from a proxy", my(2013, "Lost connection to MySQL server during query"), everywhere(KindConnection)},
		{"2006 from a proxy", my(2006, "MySQL server has gone away"), everywhere(KindConnection)},
		{"1213 everywhere", my(1213, "Deadlock found"), everywhere(KindContention)},
		{"1062 everywhere", my(1062, "Duplicate entry"), everywhere(KindOrder)},
	} {
		for server, want := range tc.kinds {
			require.Equal(t, want, server.Kind(tc.err), "%s on %s", tc.name, server)
			require.Equal(t, want == KindContention, server.Retryable(tc.err), "%s on %s: retried like a deadlock", tc.name, server)
		}
		require.Equal(t, tc.kinds[ServerUnknown], KindOf(tc.err), "KindOf is the unknown server's")
	}
}

func TestParseServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version, comment string
		want             Server
	}{
		{"10.11.19-MariaDB-0+deb12u1", "Debian 12", ServerMariaDB},
		{"11.4.2-MariaDB-log", "mariadb.org binary distribution", ServerMariaDB},
		{"5.5.5-10.6.12-MariaDB", "MariaDB Server", ServerMariaDB},
		{"8.0.36", "MySQL Community Server - GPL", ServerMySQL},
		{"8.0.35-27", "Percona Server (GPL), Release 27", ServerMySQL},
		{"8.4.0", "", ServerMySQL},
		{"8.0.30-Vitess", "Vitess", ServerMySQL},
		{"5.7.25-TiDB-v7.5.1", "", ServerTiDB},
		{"8.0.11-TiDB-v8.1.0", "TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 compatible", ServerTiDB},
		{"5.5.30", "(ProxySQL)", ServerUnknown},
		{"8.0.11", "(ProxySQL)", ServerUnknown},
		{"5.7.44-log", "", ServerUnknown},
	} {
		require.Equal(t, tc.want, ParseServer(tc.version, tc.comment), "%q %q", tc.version, tc.comment)
	}
}

// The hints of the numbers that depend on the server.
func TestServerHints(t *testing.T) {
	t.Parallel()
	require.Contains(t, Hint(&mysql.MySQLError{Number: 4031, Message: "The client was disconnected by the server because of inactivity."}), "wait_timeout")
	require.Contains(t, Hint(&mysql.MySQLError{Number: 2013, Message: "Lost connection"}), "proxy")
	require.Contains(t, Hint(&mysql.MySQLError{Number: 9005, Message: "Region is unavailable"}), "TiKV")
}
