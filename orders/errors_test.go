package orders

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	my := func(n uint16) error { return fmt.Errorf("close page: %w", &mysql.MySQLError{Number: n}) }
	cases := []struct {
		err  error
		want ErrorKind
	}{
		{nil, KindNone},
		{&CompensationError{OrderNo: "X", Reason: "r"}, KindOrder},
		{fmt.Errorf("tx: %w", &CompensationError{Reason: "r"}), KindOrder},
		{my(1213), KindContention},
		{my(1205), KindContention},
		{errors.New("driver: bad connection"), KindDatabase}, // only the driver's own values count
		{fmt.Errorf("x: %w", driver.ErrBadConn), KindConnection},
		{mysql.ErrInvalidConn, KindConnection},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, KindConnection},
		{fmt.Errorf("page: %w", context.DeadlineExceeded), KindCanceled},
		{context.Canceled, KindCanceled},
	}
	// About one order's values: the allow-list.
	for _, n := range []uint16{1048, 1062, 1264, 1265, 1292, 1366, 1406, 1451, 1452, 1690, 3819, 4025} {
		cases = append(cases, struct {
			err  error
			want ErrorKind
		}{my(n), KindOrder})
	}
	// The server going away or refusing writes for a while.
	for _, n := range []uint16{1040, 1047, 1053, 1290, 1317, 1792, 1836, 1927, 1969, 3024, 3101} {
		cases = append(cases, struct {
			err  error
			want ErrorKind
		}{my(n), KindConnection})
	}
	// Schema, privileges, configuration, disk, and anything unknown.
	for _, n := range []uint16{1146, 1054, 1142, 1143, 1044, 1665, 1114, 1021, 1206, 1644, 9999} {
		cases = append(cases, struct {
			err  error
			want ErrorKind
		}{my(n), KindDatabase})
	}
	for _, c := range cases {
		require.Equal(t, c.want, KindOf(c.err), "%v", c.err)
		require.Equal(t, c.want != KindNone && c.want != KindOrder, NotNow(c.err), "NotNow(%v)", c.err)
	}
	require.True(t, ServerUnknown.retryable(my(1213)))
	require.False(t, ServerUnknown.retryable(my(1062)))
	require.True(t, ServerUnknown.splitPage(my(1062)))
	require.True(t, ServerUnknown.splitPage(my(1205)))
	require.True(t, ServerUnknown.splitPage(my(1206)))
	require.False(t, ServerUnknown.splitPage(my(1146)))
	require.False(t, ServerUnknown.splitPage(my(1290)))
}

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
