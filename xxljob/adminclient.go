package xxljob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// adminClient makes the executor → admin calls. Each call tries the admins in
// order and stops at the first that answers HTTP 200 with code 200.
type adminClient struct {
	bases []string // without trailing "/"
	token string
	hc    *http.Client
	tr    *http.Transport
}

func newAdminClient(bases []string, token string, timeout time.Duration) *adminClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 90 * time.Second
	c := &adminClient{token: token, tr: tr, hc: &http.Client{Transport: tr, Timeout: timeout}}
	for _, b := range bases {
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	return c
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

func (c *adminClient) postOne(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("admin %s: %w", url, err)
	}
	req.Header.Set("Content-Type", contentTypeJSON)
	req.Header.Set("Accept-Charset", contentTypeJSON)
	// Always sent, even empty: 3.3.0/3.3.1 admins reject requests without it.
	req.Header.Set(headerAccessToken, c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return fmt.Errorf("admin %s: read answer: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin %s: HTTP status %d", url, resp.StatusCode)
	}
	var rt adminReturn
	if err := decodeObject(data, &rt); err != nil {
		return fmt.Errorf("admin %s: answer invalid: %w", url, err)
	}
	if rt.Code != CodeSuccess {
		msg := ""
		if rt.Msg != nil {
			msg = *rt.Msg
		}
		return fmt.Errorf("admin %s: code %d: %s", url, rt.Code, msg)
	}
	return nil
}

func (c *adminClient) close() { c.tr.CloseIdleConnections() }
