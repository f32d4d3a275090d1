package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// A bindAddr the executor could not listen on is refused at load, naming the
// key, before the API port or any job loop starts.
func TestLoadRefusesBadBindAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1", `"127.0.0.1" is not host:port (missing port in address); want e.g. 127.0.0.1:9999, or :9999 for every interface`},
		{"::1:9999", `"::1:9999" is not host:port (too many colons in address); want e.g. 127.0.0.1:9999, or :9999 for every interface`},
		{"127.0.0.1:", `"127.0.0.1:" has no port; want e.g. 127.0.0.1:9999`},
		{"127.0.0.1:http", `"127.0.0.1:http": port "http" is not a number`},
		{"127.0.0.1:70000", `"127.0.0.1:70000": port 70000 out of range 0-65535`},
		{"127.0.0.1:-1", `"127.0.0.1:-1": port -1 out of range 0-65535`},
		{"no-such-host.invalid:9999", `"no-such-host.invalid:9999": host "no-such-host.invalid" is neither an IP address nor a name that resolves (lookup no-such-host.invalid`},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			_, err := config.LoadWith(nil, envOf(map[string]string{"XXL_JOB_EXECUTOR_BINDADDR": tc.addr}))
			require.ErrorContains(t, err, "config: 1 problem(s):\nxxl.job.executor.bindAddr: "+tc.want)
		})
	}
	for _, addr := range []string{"", ":9999", "127.0.0.1:23999", "[::1]:9999", "0.0.0.0:0", "localhost:9999"} {
		_, err := config.LoadWith(nil, envOf(map[string]string{"XXL_JOB_EXECUTOR_BINDADDR": addr}))
		require.NoError(t, err, addr)
	}
}
