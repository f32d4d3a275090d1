package redact_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/orderjob/executor/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"http://u:adminpw@admin:8080/xxl-job-admin", "http://u:xxxxx@admin:8080/xxl-job-admin"},
		{"http://u@admin:8080/", "http://u@admin:8080/"},
		{"https://pay/close?token=SECRET123&order=1", "https://pay/close?order=1&token=xxxxx"},
		{"https://pay/close?access_token=a&api-key=b&Signature=c&sessionId=d&x=1", "https://pay/close?Signature=xxxxx&access_token=xxxxx&api-key=xxxxx&sessionId=xxxxx&x=1"},
		{"https://pay/close?order=1", "https://pay/close?order=1"},
		{"127.0.0.1:9998", "127.0.0.1:9998"},
		{"svc:p4ss@host", "xxxxx"},
		{"pay/close?token=SECRET2&x=1", "pay/close?token=xxxxx&x=1"},
		{"/healthz", "/healthz"},
		{"http://u:p@[::1", "xxxxx"},
		{"", ""},
	} {
		if got := redact.URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	got := redact.Named([]string{"orders=http://svc:p4ss@order-svc:8080", "bare"})
	if got[0] != "orders=http://svc:xxxxx@order-svc:8080" || got[1] != "bare" {
		t.Errorf("Named = %v", got)
	}
}

// An HTTP client error repeats the request URL, query included; Err masks
// it there.
func TestErr(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://u:pw-SECRET@127.0.0.1:1/close?token=tok-SECRET", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req) //nolint:bodyclose // port 1 refuses: there is no response
	if err == nil {
		t.Fatal("port 1 answered")
	}
	if !strings.Contains(err.Error(), "tok-SECRET") {
		t.Fatalf("the client's error no longer carries the query (%v): this test has nothing to check", err)
	}
	if msg := redact.Err(err).Error(); strings.Contains(msg, "SECRET") {
		t.Fatalf("Err left a secret: %s", msg)
	}
	if redact.Err(nil) != nil {
		t.Fatal("Err(nil) != nil")
	}
}
