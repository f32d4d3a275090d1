package dbserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// OrderData is an error the domain raises about the data of one order's
// rows (orders' CompensationError: a missing inventory row, too little
// locked stock): Kind calls it KindOrder when OrderDataError reports true.
// So the classification knows such errors without importing the domain.
type OrderData interface {
	error
	OrderDataError() bool
}

// ErrorKind says what an error of the close path is about, which decides what
// happens to the orders it concerns. KindOf computes it; the close path acts
// on it in this order, whatever the page size:
//
//	KindOrder       the per-order fallback isolates the order; it is dead-lettered, the others close
//	KindContention  retried, then the page falls back to one order at a time; an order still
//	                contended is skipped (skipped_locked) for the next pass, never dead-lettered
//	KindConnection, KindDatabase, KindCanceled
//	                the run (or CloseOrder, CloseOrders) stops and returns the error: nothing is
//	                dead-lettered, the transaction rolled back, the next run tries again
//
// Callers that schedule work per order (the delayed-task dispatcher) use
// NotNow: such an error says nothing about the order and should not count
// against it.
type ErrorKind int

const (
	// KindNone: no error.
	KindNone ErrorKind = iota
	// KindOrder: about the rows of one order: a compensation check failed
	// (OrderData: orders' *CompensationError), or the server rejected a
	// value of that order's rows (orderDataErrors: a duplicate order_close_log or outbox row 1062,
	// out of range 1264/1690, a bad or too long value 1366/1406/1292/1265, a
	// NULL 1048, a foreign key 1452/1451, a check constraint 3819/4025).
	KindOrder
	// KindContention: a deadlock (1213) or lock wait timeout (1205): other
	// transactions hold the rows; the same work may succeed when run again.
	KindContention
	// KindConnection: the connection or the server's state, expected to pass
	// on its own: the connection was lost or killed, the server is shutting
	// down, read-only (a replica or after a failover), has too many
	// connections, a cluster node is not ready, or a statement was
	// interrupted or timed out.
	KindConnection
	// KindDatabase: about the database rather than an order, and usually
	// needing an operator: a table or column missing (1146, 1054), a
	// privilege missing (1142, 1143, 1044), the binary log format (1665), the
	// disk or a table full (1021, 1114), too many locks for one transaction
	// (1206), or any other error not known to be about one order (Hint says
	// what to do where it is known).
	KindDatabase
	// KindCanceled: the caller's context was cancelled, or the close path's
	// own bound on one page's work ran out.
	KindCanceled
)

var kindNames = [...]string{
	KindNone: "none", KindOrder: "order", KindContention: "contention",
	KindConnection: "connection", KindDatabase: "database", KindCanceled: "canceled",
}

func (k ErrorKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// MySQL error numbers the close path treats specially.
const (
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
	errLockTableFull   = 1206 // too many row locks for the buffer pool
	errBinlogCacheFull = 1197 // transaction too large for max_binlog_cache_size
)

// orderDataErrors are the MySQL/MariaDB errors about a value in the rows a
// statement wrote or checked: in the close transaction those rows belong to
// the orders being closed, so closing them one by one finds the order at
// fault. This is an allow-list: an error not listed here is not blamed on an
// order.
var orderDataErrors = map[uint16]bool{
	1048: true, // column cannot be null
	1062: true, // duplicate entry (order_close_log.uk_order_no, order_outbox.uk_order_event)
	1216: true, // foreign key: no parent row (old form)
	1217: true, // foreign key: row is referenced (old form)
	1264: true, // out of range value for a column
	1265: true, // data truncated for a column
	1292: true, // truncated incorrect value
	1366: true, // incorrect value for a column
	1406: true, // data too long for a column
	1451: true, // foreign key: row is referenced
	1452: true, // foreign key: no parent row
	1586: true, // duplicate entry for a named key (MySQL)
	1690: true, // BIGINT value out of range (locked - delta, available + delta)
	3819: true, // check constraint violated (MySQL)
	4025: true, // check constraint failed (MariaDB)
}

// connectionErrors are MySQL/MariaDB errors about the server's state or the
// connection, expected to pass without an operator.
var connectionErrors = map[uint16]bool{
	1040: true,                                     // too many connections
	1047: true,                                     // unknown command: a Galera node not ready (WSREP has not yet prepared node)
	1053: true,                                     // server shutdown in progress
	1077: true, 1078: true, 1079: true, 1080: true, // shutdown
	1152: true, 1153: true, 1156: true, 1157: true, 1158: true, 1159: true, 1160: true, 1161: true, // network
	1180: true, // got error during COMMIT
	1203: true, // max user connections
	1290: true, // --read-only
	1317: true, // query execution was interrupted
	1412: true, // table definition changed, retry the transaction
	1637: true, // too many active concurrent transactions
	1792: true, // read-only transaction
	1836: true, // read-only mode
	1927: true, // connection killed (MariaDB)
	1969: true, // statement timeout (MariaDB max_statement_time)
	3024: true, // max_execution_time exceeded (MySQL)
	3101: true, // a Group Replication plugin rolled the transaction back
	// The client library's codes, which proxies (ProxySQL, vtgate) send as
	// server errors when the backend goes away.
	2006: true, // MySQL server has gone away
	2013: true, // lost connection to MySQL server during query
}

// Numbers whose meaning depends on the server (see Server).
const errMySQLInactivity = 4031 // MySQL 8; on MariaDB a missing referenced trigger

// tidbRetryable are TiDB's transaction errors that a retry may pass: KV
// error safe to retry, schema changed during the statement, write
// conflict (optimistic transactions).
var tidbRetryable = map[uint16]bool{8022: true, 8028: true, 9007: true}

// tidbUnavailable are TiDB's errors about its cluster's state: PD server
// timeout, TiKV server timeout, region unavailable.
var tidbUnavailable = map[uint16]bool{9001: true, 9002: true, 9005: true}

// KindOf classifies err (see ErrorKind) without knowing the server:
// ServerUnknown.Kind(err).
func KindOf(err error) ErrorKind { return ServerUnknown.Kind(err) }

// Kind classifies err as server s means it (see ErrorKind and Server).
// Wrapped errors are unwrapped; in a join, the first classified error
// decides.
func (s Server) Kind(err error) ErrorKind {
	if err == nil {
		return KindNone
	}
	var od OrderData
	if errors.As(err, &od) && od.OrderDataError() {
		return KindOrder
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch {
		case me.Number == errDeadlock || me.Number == errLockWaitTimeout:
			return KindContention
		case orderDataErrors[me.Number]:
			return KindOrder
		case connectionErrors[me.Number]:
			return KindConnection
		case me.Number == errMySQLInactivity && s.inactivity(me.Message):
			return KindConnection
		case (s == ServerTiDB || s == ServerUnknown) && tidbRetryable[me.Number]:
			return KindContention
		case (s == ServerTiDB || s == ServerUnknown) && tidbUnavailable[me.Number]:
			return KindConnection
		}
		return KindDatabase
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindCanceled
	}
	var ne net.Error
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return KindConnection
	}
	return KindDatabase
}

// inactivity reports whether a 4031 with message msg is MySQL's
// disconnect for inactivity (on MariaDB 4031 is a missing trigger).
func (s Server) inactivity(msg string) bool {
	switch s {
	case ServerMySQL:
		return true
	case ServerUnknown:
		return strings.Contains(msg, "inactivity")
	}
	return false
}

// NotNow reports whether err says nothing about the order it concerns: the
// database is unreachable, in a state that should pass, missing a table or a
// privilege, the order's rows are contended, or the work ran out of time.
// Work on the order should be retried later without counting the attempt
// against it (no dead letter, no retry spent); only KindOrder errors (and
// nil) return false. Errors of CloseOrder and CloseOrders are classified this
// way.
func NotNow(err error) bool {
	switch KindOf(err) {
	case KindContention, KindConnection, KindDatabase, KindCanceled:
		return true
	}
	return false
}

// Retryable reports a transaction aborted by lock contention: deadlock or
// lock wait timeout (or the server's own kind of write conflict). The same
// transaction may succeed when run again.
func (s Server) Retryable(err error) bool { return s.Kind(err) == KindContention }

// RolledBack reports a transaction the server rolled back whole for lock
// contention, so that running it again at once is cheap and may pass: a
// deadlock's victim (Galera's conflicts are reported so) or the server's
// own write conflict. A lock wait timeout is Retryable but not this: it
// spent the whole wait already, and rolled back only its statement.
func (s Server) RolledBack(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errLockWaitTimeout {
		return false
	}
	return s.Retryable(err)
}

// SplitPage reports whether a page whose batch transaction failed with err
// should be closed again one order per transaction: the error is about one
// order's rows (the fallback finds it), the rows are contended (smaller
// transactions wait for fewer rows), or the transaction was too large for
// the server. Anything else fails the whole page alike.
func (s Server) SplitPage(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == errLockTableFull || me.Number == errBinlogCacheFull) {
		return true
	}
	k := s.Kind(err)
	return k == KindOrder || k == KindContention
}
