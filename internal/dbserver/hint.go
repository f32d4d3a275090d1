package dbserver

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Hint returns what an operator can do about an error that stopped a close
// run (KindDatabase, KindConnection, KindContention), in one sentence that
// names the table, column or privilege concerned where the server's message
// gives it: "table order_close_log is missing: run executor migrate". It
// returns "" for nil, for KindOrder errors (those are dead-lettered, with
// the error, in order_dead_letter) and for errors it knows nothing useful
// about.
func Hint(err error) string {
	switch KindOf(err) {
	case KindNone, KindOrder:
		return ""
	case KindCanceled:
		return "the run was cancelled or a page ran past its time bound; the next run goes on where this one stopped"
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		if errors.Is(err, driver.ErrBadConn) {
			// What the driver returns for a read-only answer too: with
			// rejectReadOnly it closes that connection and says only this.
			return "the database dropped the connection: the server is down or restarting, or it answered read-only (a replica, or the old primary after a failover: check that the DSN's address leads to the primary); the next run retries on new connections"
		}
		if KindOf(err) == KindConnection {
			return "the database connection failed; check that the server is up and reachable at the configured DSN, the next run retries"
		}
		return ""
	}
	msg := me.Message
	switch me.Number {
	case 1146:
		if t := lastName(match(reMissingTable, msg)); t != "" {
			return fmt.Sprintf("table %s is missing: run executor migrate", t)
		}
		return "a table is missing: run executor migrate"
	case 1054:
		if c := match(reUnknownColumn, msg); c != "" {
			return fmt.Sprintf("column %s is missing: run executor migrate (it adds the columns the executor needs)", c)
		}
		return "a column is missing: run executor migrate"
	case 1142, 1143:
		if d, ok := DeniedBy(err); ok && d.Command != "" {
			return fmt.Sprintf("the database user %s may not %s on table %s: grant SELECT, INSERT, UPDATE and DELETE on the order tables to the executor's user",
				d.User, d.Command, d.Table)
		}
		return "the database user lacks a privilege: grant SELECT, INSERT, UPDATE and DELETE on the order tables to the executor's user"
	case 1044, 1045:
		return "the database user may not use this database: check the DSN's user, password and grants"
	case 1665, 1664, 1663:
		return "the server's binlog_format is STATEMENT, which cannot log READ COMMITTED transactions: set binlog_format=ROW (or MIXED)"
	case 1021, 1114, 3, 1030:
		return "the server could not write (disk full, a table at its size limit, or a storage engine error): free space or see the server's error log; the next run retries"
	case errLockTableFull, errBinlogCacheFull:
		return "one close transaction takes more locks or binary log than the server allows: lower the job's pageSize (or raise innodb_buffer_pool_size / max_binlog_cache_size)"
	case 1290, 1792, 1836:
		return "the server is read-only (a replica, or after a failover): point the executor's DSN at the primary"
	case 1047, 3101:
		return "this cluster node is not ready to take writes (Galera not synced or Group Replication rolled back): point the DSN at a ready node, or wait; the next run retries"
	case 1040, 1203:
		return "the server refuses more connections: lower mysql.maxOpenConns or raise max_connections / max_user_connections"
	case 1969, 3024:
		return "a statement ran past max_statement_time / max_execution_time: raise it for the executor's user, or lower the job's pageSize"
	case 1317, 1927:
		return "a statement or connection was killed (KILL, or a proxy); the next run retries"
	case errLockWaitTimeout, errDeadlock:
		return "other transactions held the rows too long; the next run retries (look for long transactions on the order tables)"
	case errMySQLInactivity:
		if KindOf(err) == KindConnection {
			return "the server closed a connection idle longer than its wait_timeout: keep mysql.connMaxIdleTime below the server's wait_timeout; the next run retries"
		}
	case 2006, 2013:
		return "the connection to the server was lost (or a proxy such as ProxySQL or vtgate lost its backend); the next run retries"
	case 9001, 9002, 9005:
		return "the TiDB cluster could not reach PD or TiKV (a timeout, a region unavailable); the next run retries"
	case 1644:
		return "a trigger on one of the order tables raised an error (SIGNAL): see its message; the orders stay open until it lets the close through"
	}
	if KindOf(err) == KindConnection {
		return "the database is not available right now; the next run retries"
	}
	return ""
}

// Denial is what a privilege error (1142 on a table, 1143 on a column)
// says: the statement's command ("UPDATE"), the user, and the table with
// its database when the server names it ("`shop`.`t`", as MariaDB does; a
// bare 't' leaves Database empty). Fields the message lacks are empty.
type Denial struct {
	Command, User, Database, Table string
}

// DeniedBy returns what err's privilege error (1142, 1143) says, and false
// for any other error.
func DeniedBy(err error) (Denial, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || (me.Number != 1142 && me.Number != 1143) {
		return Denial{}, false
	}
	m := reDenied.FindStringSubmatch(me.Message)
	if m == nil {
		return Denial{}, true
	}
	d := Denial{Command: m[1], User: m[2], Table: lastName(m[3])}
	name := strings.NewReplacer("`", "", "'", "").Replace(m[3])
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		d.Database = name[:i]
	}
	return d, true
}

var (
	reMissingTable  = regexp.MustCompile("Table '([^']+)' doesn't exist")
	reUnknownColumn = regexp.MustCompile("Unknown column '([^']+)'")
	// "INSERT command denied to user 'u'@'h' for table `db`.`t`" (MariaDB)
	// or "... for table 't'" (MySQL); column grants (1143) name the column
	// first: "... for column 'c' in table 't'".
	reDenied = regexp.MustCompile("(\\w+) command denied to user '([^']*)'@'[^']*' for (?:column '[^']*' in )?table ([`'][^ ]*)")
)

func match(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// lastName turns "db.t", "`db`.`t`" or "'t'" into t.
func lastName(s string) string {
	s = strings.Trim(s, "`'")
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Trim(s, "`'")
}
