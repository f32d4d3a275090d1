//go:build linux

package app

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/orderjob/executor/config"
)

// openPTY opens a pseudo-terminal and returns its terminal side, a real
// terminal for the process log to be written to.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	return tty
}

// log.format auto is text on a terminal and JSON on anything else; json
// and text force their format.
func TestLogFormat(t *testing.T) {
	tty := openPTY(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer file.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devNull.Close()
	for _, c := range []struct {
		format string
		w      any
		name   string
		want   string
	}{
		{"auto", tty, "terminal", "text"},
		{"auto", file, "file", "json"},
		{"auto", devNull, "/dev/null (a character device, not a terminal)", "json"},
		{"auto", &bytes.Buffer{}, "buffer", "json"},
		{"json", tty, "terminal", "json"},
		{"text", file, "file", "text"},
	} {
		cfg := &config.Config{Log: config.Log{Format: c.format, Level: "info"}}
		w := c.w.(interface{ Write([]byte) (int, error) })
		require.Equal(t, c.want, LogFormat(cfg, w), "%s on a %s", c.format, c.name)
	}
	// The logger NewLogger builds writes that format.
	var buf bytes.Buffer
	NewLogger(&config.Config{Log: config.Log{Format: "text", Level: "info"}}, &buf).Info("hello", "k", "v")
	require.True(t, strings.HasPrefix(buf.String(), "time="), buf.String())
	require.Contains(t, buf.String(), "msg=hello k=v")
	buf.Reset()
	NewLogger(&config.Config{Log: config.Log{Format: "auto", Level: "info"}}, &buf).Info("hello")
	require.True(t, strings.HasPrefix(buf.String(), `{"time":`), buf.String())
}
