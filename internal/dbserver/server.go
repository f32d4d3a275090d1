package dbserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Server is what the database server is, learned at connect
// (DetectServer): a few error numbers mean different things on each, and
// proxies pass on what the servers behind them say.
//
//	4031        MySQL 8: the server disconnected the client for inactivity
//	            (KindConnection); MariaDB: ER_REFERENCED_TRG_DOES_NOT_EXIST,
//	            a trigger definition names a missing trigger (KindDatabase)
//	8022, 8028, 9007
//	            TiDB: a transaction to retry (KV error safe to retry, schema
//	            changed during the statement, write conflict): KindContention,
//	            retried and skipped like a deadlock
//	9001, 9002, 9005
//	            TiDB: PD or TiKV timed out, a region unavailable: KindConnection
//	2006, 2013  the client library's own "gone away" and "lost connection",
//	            which ProxySQL and vtgate send as server errors: KindConnection
//	            on every server
type Server int

const (
	// ServerUnknown: not detected. Numbers that mean one thing everywhere
	// are classified as such; 4031 by its message (MySQL's speaks of
	// inactivity); TiDB's numbers as TiDB's (no other server uses them).
	ServerUnknown Server = iota
	// ServerMariaDB: MariaDB, Galera included.
	ServerMariaDB
	// ServerMySQL: MySQL or Percona Server, also behind vtgate (Vitess).
	ServerMySQL
	// ServerTiDB: TiDB (its VERSION() names it).
	ServerTiDB
)

var serverNames = [...]string{ServerUnknown: "unknown", ServerMariaDB: "MariaDB", ServerMySQL: "MySQL", ServerTiDB: "TiDB"}

func (s Server) String() string {
	if s >= 0 && int(s) < len(serverNames) {
		return serverNames[s]
	}
	return "unknown"
}

// ParseServer tells the server from its VERSION() and @@version_comment:
// "10.11.19-MariaDB-0+deb12u1", "8.0.36" with "MySQL Community Server -
// GPL", "5.7.25-TiDB-v7.5.1", "8.0.30-Vitess". A proxy that reports a
// version of its own (ProxySQL's mysql-server_version, "(ProxySQL)" as the
// comment) with nothing more says only what it was configured to say: a
// MySQL-like number is taken as MySQL, anything else stays unknown.
func ParseServer(version, comment string) Server {
	v, c := strings.ToLower(version), strings.ToLower(comment)
	switch {
	case strings.Contains(v, "tidb") || strings.Contains(c, "tidb"):
		return ServerTiDB
	case strings.Contains(v, "mariadb") || strings.Contains(c, "mariadb"):
		return ServerMariaDB
	case strings.Contains(c, "proxysql"):
		return ServerUnknown
	case strings.Contains(v, "vitess") || strings.Contains(c, "mysql") || strings.Contains(c, "percona"):
		return ServerMySQL
	case strings.HasPrefix(v, "8.") || strings.HasPrefix(v, "9."):
		return ServerMySQL // MariaDB's versions say MariaDB; 8.x and 9.x are MySQL's
	}
	return ServerUnknown
}

// detectServerSQL reads what the server says it is. No table is read.
const detectServerSQL = `SELECT VERSION() AS version, @@version_comment AS comment`

// DetectServer asks the server what it is (see ParseServer).
func DetectServer(ctx context.Context, q sqlx.QueryerContext) (Server, error) {
	var row struct {
		Version string `db:"version"`
		Comment string `db:"comment"`
	}
	if err := sqlx.GetContext(ctx, q, &row, detectServerSQL); err != nil {
		return ServerUnknown, fmt.Errorf("read the server's version: %w", err)
	}
	return ParseServer(row.Version, row.Comment), nil
}
