package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// testPKI is a CA and the PEM files it signed: a server certificate for
// 127.0.0.1 and redis.test, and a client certificate.
type testPKI struct {
	dir, ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	p := testPKI{dir: t.TempDir()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.ca = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "PRIVATE KEY", keyDER)
	}
	// Redis uses its certificate for both sides of its own connections
	// (Sentinel to master): the server's is good for both.
	p.serverCert, p.serverKey = issue("server", 2, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		[]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"redis.test"})
	p.clientCert, p.clientKey = issue("client", 3, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	return p
}

func (p testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// tlsConfLines are the redis.conf lines of a TLS-only server that requires
// client certificates of the test CA.
func (p testPKI) tlsConfLines(port int) string {
	return strings.Join([]string{"port 0", "tls-port " + strconv.Itoa(port), "bind 127.0.0.1",
		"tls-cert-file " + p.serverCert, "tls-key-file " + p.serverKey, "tls-ca-cert-file " + p.ca,
		"tls-auth-clients yes", "tls-replication yes", "save \"\"", "appendonly no"}, "\n") + "\n"
}

// startRedisConf starts `redis-server conf [extra...]` with a private config
// file, waits until port accepts connections, and kills the process (by its
// pid) when t ends.
func startRedisConf(t *testing.T, port int, conf string, extra ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "redis.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf+"dir "+filepath.Dir(path)+"\n"), 0o600))
	cmd := exec.Command("redis-server", append([]string{path}, extra...)...)
	logf, err := os.Create(path + ".log")
	require.NoError(t, err)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	out := func() string { b, _ := os.ReadFile(path + ".log"); return string(b) }
	require.NoError(t, cmd.Start(), "start redis-server")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("redis-server %s:\n%s", extra, out())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		require.True(t, time.Now().Before(deadline), "redis-server on port %d did not listen: %v\n%s", port, err, out())
		time.Sleep(20 * time.Millisecond)
	}
}

func loopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Every Redis connection speaks TLS when redis.tls is on: the client in
// single and sentinel mode (the Sentinel itself behind TLS and a password,
// redis.sentinelPassword), and each lock node. The server's certificate is
// checked against the CA and the server name; a client certificate is sent;
// bad files fail at start naming their key.
func TestRedisTLSAndSentinelCredentials(t *testing.T) {
	if out, err := exec.Command("redis-server", "--version").Output(); err != nil {
		t.Fatalf("redis-server not on PATH (apt-get install redis-server): %v", err)
	} else {
		t.Logf("%s", strings.TrimSpace(string(out)))
	}
	p := newTestPKI(t)
	port, sport := loopbackPort(t), loopbackPort(t)
	startRedisConf(t, port, p.tlsConfLines(port))
	startRedisConf(t, sport, strings.Replace(p.tlsConfLines(sport), "bind 127.0.0.1\n", "bind 127.0.0.1\nrequirepass sentinel-pw\n", 1)+
		"sentinel monitor tlsmaster 127.0.0.1 "+strconv.Itoa(port)+" 1\n", "--sentinel")
	addr, saddr := "127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(sport)
	good := config.RedisTLS{Enabled: true, CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKey}
	single := config.Redis{Addr: []string{addr}, Mode: "single", TLS: good}
	sentinel := config.Redis{Addr: []string{saddr}, Mode: "sentinel", MasterName: "tlsmaster", SentinelPassword: "sentinel-pw", TLS: good}

	with := func(r config.Redis, f func(*config.Redis)) config.Redis { f(&r); return r }
	for _, tc := range []struct {
		name    string
		cfg     config.Redis
		wantErr string // "" answers PING
		atStart bool   // refused by NewRedis, before any connection
	}{
		{"single", single, "", false},
		{"sentinel behind TLS and a password", sentinel, "", false},
		{"server name from the certificate", with(single, func(r *config.Redis) { r.TLS.ServerName = "redis.test" }), "", false},
		{"lock node", with(single, func(r *config.Redis) { r.Addr = []string{"127.0.0.1:1"}; r.LockNodes = []string{addr} }), "", false},
		{"insecure without a CA", with(single, func(r *config.Redis) { r.TLS.CAFile = ""; r.TLS.InsecureSkipVerify = true }), "", false},
		{"sentinel without its password", with(sentinel, func(r *config.Redis) { r.SentinelPassword = "" }), "NOAUTH", false},
		{"sentinel with a wrong password", with(sentinel, func(r *config.Redis) { r.SentinelPassword = "nope" }), "WRONGPASS", false},
		{"system roots only", with(single, func(r *config.Redis) { r.TLS.CAFile = "" }), "certificate signed by unknown authority", false},
		{"wrong server name", with(single, func(r *config.Redis) { r.TLS.ServerName = "other.test" }), "other.test", false},
		{"no client certificate", with(single, func(r *config.Redis) { r.TLS.CertFile, r.TLS.KeyFile = "", "" }), "certificate", false},
		{"plain text to a TLS port", with(single, func(r *config.Redis) { r.TLS = config.RedisTLS{} }), "", false},
		{"missing CA file", with(single, func(r *config.Redis) { r.TLS.CAFile = p.dir + "/none.pem" }), "redis.tls.caFile: open " + p.dir + "/none.pem: no such file or directory", true},
		{"CA file without PEM", with(single, func(r *config.Redis) { r.TLS.CAFile = p.dir }), "redis.tls.caFile: read " + p.dir + ": is a directory", true},
		{"key of another certificate", with(single, func(r *config.Redis) { r.TLS.KeyFile = p.serverKey }), "redis.tls.certFile/keyFile: load " + p.clientCert + " and " + p.serverKey + ": tls: private key does not match public key", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rdb, err := NewRedis(tc.cfg)
			if tc.atStart {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			defer rdb.Close()
			target := rdb
			if len(tc.cfg.LockNodes) > 0 {
				nodes, err := newLockNodes(tc.cfg)
				require.NoError(t, err)
				defer nodes[0].Close()
				target = nodes[0]
			}
			err = target.Ping(ctx).Err()
			if tc.name == "plain text to a TLS port" {
				require.Error(t, err, "a plain-text client got an answer from the TLS port")
				return
			}
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
