package dbserver

import (
	"database/sql/driver"
	"fmt"
	"io"
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
