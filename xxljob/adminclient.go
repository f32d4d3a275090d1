package xxljob

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// adminClient makes the executor → admin calls. Each call tries the admins in
// order and stops at the first that answers HTTP 200 with code 200. Every
// answer also tells an auto executor which dialect its admin speaks.
type adminClient struct {
	bases   []string // without trailing "/"
	token   string
	appName string
	wire    *wire
	hc      *http.Client
	tr      *http.Transport
}

// adminError is an admin's refusal: HTTP 200 with a code other than 200.
type adminError struct {
	URL  string
	Code int
	Msg  string
}

func (e *adminError) Error() string {
	return fmt.Sprintf("admin %s: code %d: %s", e.URL, e.Code, e.Msg)
}

func newAdminClient(cfg Config, w *wire) (*adminClient, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 90 * time.Second
	tlsCfg, err := AdminTLSConfig(cfg)
	if err != nil {
		return nil, err
	}
	tr.TLSClientConfig = tlsCfg
	c := &adminClient{token: cfg.AccessToken, appName: cfg.AppName, wire: w, tr: tr,
		hc: &http.Client{Transport: tr, Timeout: cfg.HTTPClientTimeout}}
	for _, b := range cfg.AdminAddresses {
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	return c, nil
}

// AdminTLSConfig returns the TLS settings of the executor's calls to an
// https admin: the system's roots plus AdminCAFile's, or no verification at
// all when AdminInsecureSkipVerify is set (Start warns about it). A tool that
// calls the same admin (a console client) can share them.
func AdminTLSConfig(cfg Config) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.AdminInsecureSkipVerify} //nolint:gosec // opt-in, warned at every start
	if cfg.AdminCAFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(cfg.AdminCAFile)
	if err != nil {
		return nil, fmt.Errorf("AdminCAFile: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("AdminCAFile: no PEM certificate in %s", cfg.AdminCAFile)
	}
	t.RootCAs = pool
	return t, nil
}

// post sends body to path on each admin in turn until one accepts it. The
// returned error joins every admin's failure.
func (c *adminClient) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	var errs []error
	for _, base := range c.bases {
		err := c.postOne(ctx, base+"/"+path, b)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// callback sends a batch in the current dialect's shape. An auto executor
// that knows only "3.x" guesses the array of 3.3/3.4; if the admin cannot
// parse it (the main admin wants an object), it switches and sends again.
func (c *adminClient) callback(ctx context.Context, batch []callbackParam) error {
	d := c.wire.get()
	err := c.post(ctx, adminCallback, callbackBody(d, batch))
	var ae *adminError
	if err == nil || !c.wire.auto || !errors.As(err, &ae) || !strings.HasPrefix(ae.Msg, msgAdminParseError) {
		return err
	}
	other := dialectMain
	if d == dialectMain {
		other = dialect34
	}
	c.wire.learn(other, whyCallbackShape)
	return c.post(ctx, adminCallback, callbackBody(c.wire.get(), batch))
}

func (c *adminClient) postOne(ctx context.Context, url string, body []byte) error {
	shown := redactURL(url) // an address may carry a password
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("admin %s: %w", shown, redactErr(err))
	}
	req.Header.Set("Content-Type", contentTypeJSON)
	req.Header.Set("Accept-Charset", contentTypeJSON)
	// Always sent, even empty: 3.3.0/3.3.1 admins reject requests without it.
	req.Header.Set(headerAccessToken, c.token)
	// The main admin finds the group's token by it; others ignore it.
	req.Header.Set(headerAppName, c.appName)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", shown, redactErr(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return fmt.Errorf("admin %s: read answer: %w", shown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin %s: HTTP status %d", shown, resp.StatusCode)
	}
	var rt adminReturn
	if err := decodeObject(data, &rt); err != nil {
		return fmt.Errorf("admin %s: answer invalid: %w", shown, err)
	}
	msg := ""
	if rt.Msg != nil {
		msg = *rt.Msg
	}
	if d, ok := classify(data, rt.Code, msg); ok {
		why := whyEnvelope
		if d == dialectMain {
			why = whyMainRefusal
		}
		c.wire.learn(d, why)
	}
	if rt.Code != CodeSuccess {
		return &adminError{URL: shown, Code: rt.Code, Msg: msg}
	}
	return nil
}

func (c *adminClient) close() { c.tr.CloseIdleConnections() }
