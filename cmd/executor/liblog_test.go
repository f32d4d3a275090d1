package main

import (
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// A MySQL server that breaks off its greeting makes go-sql-driver/mysql
// log a line of its own (packets.go: the read that failed). That line goes
// through the command's logger, at debug with the component, in the JSON
// log; nothing reaches the process's stderr behind the command's back, and
// the command's own error is its one line.
func TestMySQLDriverLogsThroughTheCommandsLogger(t *testing.T) {
	require.Same(t, mysqlLog, mysql.NewConfig().Logger, "the driver logs through the executor")
	env := map[string]string{
		"MYSQL_DSN": "u@tcp(" + brokenGreeting(t) + ")/x", "LOG_FORMAT": "json", "LOG_LEVEL": "debug",
		"XXL_JOB_EXECUTOR_LOGPATH": t.TempDir(),
	}
	var code int
	var errOut string
	fd2 := captureFD2(t, func() { code, _, errOut = runCLI(t, env, "run", "orderTimeoutCloseJob") })
	require.Equal(t, 1, code, errOut)
	require.Empty(t, fd2, "nothing written to the process's stderr behind the command's back")

	var driverLines []map[string]any
	for line := range strings.Lines(errOut) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["component"] == "go-sql-driver/mysql" {
			driverLines = append(driverLines, rec)
		}
	}
	require.NotEmpty(t, driverLines, errOut)
	require.Equal(t, "DEBUG", driverLines[0]["level"])
	require.Contains(t, driverLines[0]["msg"], "packets.go:")
	require.Contains(t, errOut, "executor run: mysql: ping: invalid connection\n")
}

// brokenGreeting listens on a local port for as long as the test runs and
// answers each connection with half a packet header, then closes it: the
// client's read of the server's greeting fails, as on a connection reset
// mid-handshake, without depending on when a reset arrives.
func brokenGreeting(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			_, _ = c.Write([]byte{0x4a, 0x00})
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
