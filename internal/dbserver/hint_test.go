package dbserver

import (
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestHint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  *mysql.MySQLError
		want string
	}{
		{&mysql.MySQLError{Number: 1146, Message: "Table 'shop.order_close_log' doesn't exist"},
			"table order_close_log is missing: run executor migrate"},
		{&mysql.MySQLError{Number: 1054, Message: "Unknown column 'close_reason' in 'SET'"},
			"column close_reason is missing"},
		{&mysql.MySQLError{Number: 1142, Message: "INSERT command denied to user 'job'@'localhost' for table `shop`.`order_close_log`"},
			"the database user job may not INSERT on table order_close_log"},
		{&mysql.MySQLError{Number: 1142, Message: "UPDATE command denied to user 'job'@'%' for table 'inventory'"},
			"may not UPDATE on table inventory"},
		{&mysql.MySQLError{Number: 1665, Message: "Cannot execute statement"}, "binlog_format=ROW"},
		{&mysql.MySQLError{Number: 1290, Message: "read-only"}, "read-only"},
		{&mysql.MySQLError{Number: 1114, Message: "The table 'order_close_log' is full"}, "disk full"},
	}
	for _, c := range cases {
		require.Contains(t, Hint(fmt.Errorf("log 3 closes: %w", c.err)), c.want, c.err.Message)
	}
	require.Empty(t, Hint(nil))
	require.Empty(t, Hint(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}))
	require.Contains(t, Hint(driver.ErrBadConn), "answered read-only", "rejectReadOnly's answer to a read-only server")
	require.Contains(t, Hint(io.ErrUnexpectedEOF), "connection failed")
}

// DeniedBy reads the command, user, database and table of a privilege
// error in MariaDB's form and both of MySQL's, through wrapping.
func TestDeniedBy(t *testing.T) {
	for msg, want := range map[string]Denial{
		"UPDATE command denied to user 'ops'@'10.0.0.5' for table `shop`.`order_outbox`":    {"UPDATE", "ops", "shop", "order_outbox"},
		"DELETE command denied to user 'ops'@'%' for table 'shop.job_delay_task'":           {"DELETE", "ops", "shop", "job_delay_task"},
		"CREATE command denied to user 'ops'@'localhost' for table 'order_job_demo_batch'":  {"CREATE", "ops", "", "order_job_demo_batch"},
		"SELECT command denied to user 'ops'@'h' for column 'status' in table 'order_info'": {"SELECT", "ops", "", "order_info"},
	} {
		number := uint16(1142)
		if strings.Contains(msg, "for column") {
			number = 1143
		}
		d, ok := DeniedBy(fmt.Errorf("requeue: %w", &mysql.MySQLError{Number: number, Message: msg}))
		require.True(t, ok, msg)
		require.Equal(t, want, d, msg)
	}
	_, ok := DeniedBy(&mysql.MySQLError{Number: 1146, Message: "Table 'shop.t' doesn't exist"})
	require.False(t, ok)
	_, ok = DeniedBy(nil)
	require.False(t, ok)
}
