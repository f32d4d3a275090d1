package xxljob_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
)

// A listen address the server could not bind is refused by New, before
// anything starts, saying what is wrong with it.
func TestNewRefusesBadListenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1", `ListenAddr: "127.0.0.1" is not host:port (missing port in address); want e.g. 127.0.0.1:9999, or :9999 for every interface`},
		{"127.0.0.1:", `ListenAddr: "127.0.0.1:" has no port; want e.g. 127.0.0.1:9999`},
		{"[::1]:port", `ListenAddr: "[::1]:port": port "port" is not a number`},
		{"0.0.0.0:65536", `ListenAddr: "0.0.0.0:65536": port 65536 out of range 0-65535`},
		{"nosuchhost.invalid:1", `ListenAddr: "nosuchhost.invalid:1": host "nosuchhost.invalid" is neither an IP address nor a name that resolves`},
	} {
		_, err := xxljob.New(xxljob.Config{AdminAddresses: []string{"http://127.0.0.1:8080/"}, AppName: "addr-test",
			Address: "http://127.0.0.1:9999/", ListenAddr: tc.addr, LogPath: t.TempDir()})
		require.ErrorContains(t, err, tc.want, tc.addr)
	}
}

// Start warns once, naming both, when the address given to the admin is not
// one the server listens on; a listener on every interface, or the same IP
// by number or by name, draws no warning.
func TestStartWarnsWhenAdvertisedAddressIsNotListenedOn(t *testing.T) {
	t.Parallel()
	const warning = "level=WARN msg=\"advertising "
	for _, tc := range []struct {
		name, listen, address string // {port}: a free port
		want                  string // "" no warning
	}{
		{"loopback, advertised elsewhere", "127.0.0.1:{port}", "http://192.0.2.2:{port}/",
			"advertising http://192.0.2.2:{port}/ to the admin but listening on 127.0.0.1:{port}: the advertised host 192.0.2.2 is not the listening IP 127.0.0.1"},
		{"another port", "127.0.0.1:{port}", "http://127.0.0.1:1/",
			"advertising http://127.0.0.1:1/ to the admin but listening on 127.0.0.1:{port}: the advertised port 1 is not the listening port {port}"},
		{"no port in the URL", "127.0.0.1:{port}", "http://192.0.2.2/",
			"advertising http://192.0.2.2/ to the admin but listening on 127.0.0.1:{port}: the advertised port 80 is not the listening port {port}"},
		{"a name elsewhere", "127.0.0.1:{port}", "http://nosuchhost.invalid:{port}/",
			"advertising http://nosuchhost.invalid:{port}/ to the admin but listening on 127.0.0.1:{port}: the advertised host nosuchhost.invalid does not resolve here (lookup nosuchhost.invalid"},
		{"the same IP", "127.0.0.1:{port}", "http://127.0.0.1:{port}/", ""},
		{"the same IP by name", "127.0.0.1:{port}", "http://localhost:{port}/", ""},
		{"every interface", ":{port}", "http://192.0.2.2:{port}/", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withPort := strings.NewReplacer("{port}", strconv.Itoa(freePort(t))).Replace
			b := setup(t, opts{cfg: func(c *xxljob.Config) {
				c.ListenAddr = withPort(tc.listen)
				c.Address = withPort(tc.address)
			}})
			logs := b.logs.String()
			if tc.want == "" {
				require.NotContains(t, logs, warning)
				return
			}
			require.Equal(t, 1, strings.Count(logs, warning), logs)
			require.Contains(t, logs, withPort(tc.want))
		})
	}
}

// freePort returns a TCP port free on loopback a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
