package xxljob_test

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
)

// TestAdminTLS: an https admin with a private CA is trusted through
// AdminCAFile; without it the registry fails on the certificate;
// AdminInsecureSkipVerify accepts it and warns.
func TestAdminTLS(t *testing.T) {
	t.Parallel()
	var regs atomic.Int32
	admin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/api/registry") {
			regs.Add(1)
		}
		_, _ = io.WriteString(w, `{"code":200,"msg":null,"content":null}`)
	}))
	defer admin.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: admin.Certificate().Raw}), 0o600))

	registers := func(t *testing.T, c func(*xxljob.Config)) (bool, string) {
		rec := &recorder{finished: map[int64]int{}}
		var logs syncBuffer
		cfg := xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{admin.URL}, AppName: "tls", ListenAddr: "127.0.0.1:0",
			LogPath: t.TempDir(), Observer: rec, RegistryInterval: time.Hour, Logger: newTextLogger(&logs)}
		c(&cfg)
		e, err := xxljob.New(cfg)
		require.NoError(t, err)
		require.NoError(t, e.Start(t.Context()))
		waitFor(t, func() bool { return rec.snapshot(func(r *recorder) bool { return r.regs == 1 }) }, "one registry round")
		require.NoError(t, e.Shutdown(t.Context()))
		return rec.regErrs == 0, logs.String()
	}
	ok, _ := registers(t, func(*xxljob.Config) {})
	require.False(t, ok, "a private CA is not trusted by default")
	ok, _ = registers(t, func(c *xxljob.Config) { c.AdminCAFile = caFile })
	require.True(t, ok, "trusted through AdminCAFile")
	ok, logs := registers(t, func(c *xxljob.Config) { c.AdminInsecureSkipVerify = true })
	require.True(t, ok)
	require.Contains(t, logs, "TLS CERTIFICATES OF THE ADMIN ARE NOT VERIFIED")

	_, err := xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{admin.URL}, AppName: "tls", AdminCAFile: filepath.Join(t.TempDir(), "none.pem")})
	require.ErrorContains(t, err, "AdminCAFile")
	require.NoError(t, os.WriteFile(caFile, []byte("not a certificate"), 0o600))
	_, err = xxljob.New(xxljob.Config{OpenWithoutToken: true, AdminAddresses: []string{admin.URL}, AppName: "tls", AdminCAFile: caFile})
	require.ErrorContains(t, err, "no PEM certificate")
}
