package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// problems are the redis.tls settings that cannot work together.
func (t RedisTLS) problems() []error {
	var p []error
	bad := func(format string, args ...any) { p = append(p, fmt.Errorf(format, args...)) }
	if !t.Enabled {
		for _, s := range []struct{ key, v string }{
			{"caFile", t.CAFile}, {"certFile", t.CertFile}, {"keyFile", t.KeyFile}, {"serverName", t.ServerName},
		} {
			if s.v != "" {
				bad("redis.tls.%s: set, but redis.tls.enabled is false (Redis would be reached without TLS)", s.key)
			}
		}
		if t.InsecureSkipVerify {
			bad("redis.tls.insecureSkipVerify: set, but redis.tls.enabled is false")
		}
		return p
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("redis.tls.certFile and redis.tls.keyFile: a client certificate needs both (certFile %q, keyFile %q)", t.CertFile, t.KeyFile)
	}
	return p
}

// Config reads the files and returns the TLS configuration of every Redis
// connection, or nil when TLS is off. Errors name the key whose file could
// not be used. Server certificates are always checked unless
// insecureSkipVerify is set explicitly.
func (t RedisTLS) Config() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	if err := errors.Join(t.problems()...); err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.caFile: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis.tls.caFile: %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis.tls.certFile/keyFile: load %s and %s: %w", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
