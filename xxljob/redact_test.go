package xxljob

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// An admin address's password or token never reaches an error or a log
// line: the failed call names the address masked.
func TestAdminAddressSecretsAreMasked(t *testing.T) {
	cfg := Config{AdminAddresses: []string{"http://u:adminpw-SECRET@127.0.0.1:1/xxl-job-admin?access_token=tok-SECRET"},
		AppName: "redact-test", HTTPClientTimeout: time.Second}
	c, err := newAdminClient(cfg, &wire{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	err = c.post(context.Background(), "api/registry", map[string]string{})
	if err == nil {
		t.Fatal("port 1 answered")
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("the error shows a secret: %v", err)
	}
	if !strings.Contains(err.Error(), "http://u:xxxxx@127.0.0.1:1/xxl-job-admin") {
		t.Fatalf("the error does not name the admin: %v", err)
	}

	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "cfg", cfg)
	if strings.Contains(buf.String(), "SECRET") || !strings.Contains(buf.String(), "127.0.0.1:1") {
		t.Fatalf("LogValue: %s", buf.String())
	}
	for in, want := range map[string]string{
		"http://admin:8080/xxl-job-admin": "http://admin:8080/xxl-job-admin",
		"u:p@admin":                       "xxxxx",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
