package dbserver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// orderData stands for the domain's errors about one order's data
// (orders' CompensationError).
type orderData struct{ about bool }

func (e orderData) Error() string        { return "close order X: r" }
func (e orderData) OrderDataError() bool { return e.about }

func TestKindOf(t *testing.T) {
	t.Parallel()
	my := func(n uint16) error { return fmt.Errorf("close page: %w", &mysql.MySQLError{Number: n}) }
	cases := []struct {
		err  error
		want ErrorKind
	}{
		{nil, KindNone},
		{orderData{about: true}, KindOrder},
		{fmt.Errorf("tx: %w", orderData{about: true}), KindOrder},
		{orderData{about: false}, KindDatabase},
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
	require.True(t, ServerUnknown.Retryable(my(1213)))
	require.False(t, ServerUnknown.Retryable(my(1062)))
	require.True(t, ServerUnknown.RolledBack(my(1213)))
	require.True(t, ServerUnknown.RolledBack(fmt.Errorf("pay: %w", my(9007))))
	require.False(t, ServerUnknown.RolledBack(my(1205)), "a lock wait timeout spent its wait")
	require.False(t, ServerMariaDB.RolledBack(my(9007)))
	require.False(t, ServerUnknown.RolledBack(my(1062)))
	require.True(t, ServerUnknown.SplitPage(my(1062)))
	require.True(t, ServerUnknown.SplitPage(my(1205)))
	require.True(t, ServerUnknown.SplitPage(my(1206)))
	require.False(t, ServerUnknown.SplitPage(my(1146)))
	require.False(t, ServerUnknown.SplitPage(my(1290)))
}
