package payment

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/orderjob/executor/internal/backoff"
	"github.com/orderjob/executor/internal/redact"
	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders"
)

// idleConnsPerHost keeps one idle connection for each close-trade call a
// page makes at once at the close's default fan-out
// (orders.CloserConfig.TradeFanOut).
const idleConnsPerHost = 16

// HTTPTradeCloserConfig configures an HTTPTradeCloser. Zero values take the
// defaults given.
type HTTPTradeCloserConfig struct {
	// URL receives the close-trade calls (see HTTPTradeCloser). Required;
	// http or https.
	URL string
	// Token, if set, is sent in TokenHeader.
	Token string
	// TokenHeader carries Token. Default "X-Payment-Token".
	TokenHeader string
	// Timeout bounds each attempt. Default 3s.
	Timeout time.Duration
	// Retries is how often a failed attempt is repeated (a transport error,
	// a timeout, status 408, 429 or 5xx); other failures are not retried.
	// 0: none; at most 10.
	Retries int
	// RetryWait is the wait before the first retry; it doubles for each
	// further one, with jitter (half to all of it). Default 100ms.
	RetryWait time.Duration
	// Client sends the calls. Default: a client of its own with keep-alive
	// and no overall timeout (Timeout bounds each attempt).
	Client *http.Client
}

// HTTPTradeCloser is the orders.TradeCloser that calls the payment side over
// HTTP. The contract:
//
//	POST {URL}
//	Content-Type: application/json
//	{TokenHeader}: {Token}                      (when a token is set)
//	{"orderNo": "..."}
//
//	200 OK, Content-Type: application/json
//	{"result": "closed" | "already_paid" | "not_found"}
//
// "closed": the trade is closed, now or before; no payment for the order
// will succeed after this answer. "already_paid": the user has paid (or a
// payment is committed and can no longer be stopped); its notification will
// reach the order service. "not_found": there is no trade for the order, and
// the payment side records the order as closed so that none can be opened
// later. The call must be idempotent: it is repeated for orders whose close
// did not commit, and after retries.
//
// Anything else is an error that leaves the order open for the next pass:
// a status other than 2xx (404 included: a wrong URL must never read as
// "no trade"), a body that is not that JSON, or an unknown result. Transport
// errors, timeouts and statuses 408, 429 and 5xx are retried Retries times
// first.
type HTTPTradeCloser struct {
	cfg       HTTPTradeCloserConfig
	client    *http.Client
	retryWait backoff.Exponential
}

// Defaults of HTTPTradeCloserConfig, and of the executor's order.payment
// keys (config takes them from here).
const (
	DefaultTradeTokenHeader = "X-Payment-Token"
	DefaultTradeTimeout     = 3 * time.Second
)

// NewHTTPTradeCloser checks cfg and returns an HTTPTradeCloser.
func NewHTTPTradeCloser(cfg HTTPTradeCloserConfig) (*HTTPTradeCloser, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("orders: close-trade URL %q is not an http(s) URL", cfg.URL)
	}
	cfg.TokenHeader = cmp.Or(cfg.TokenHeader, DefaultTradeTokenHeader)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTradeTimeout)
	cfg.RetryWait = cmp.Or(cfg.RetryWait, 100*time.Millisecond)
	if cfg.Timeout < 0 || cfg.RetryWait < 0 {
		return nil, errors.New("orders: close-trade timeout and retry wait must be positive")
	}
	if cfg.Retries < 0 || cfg.Retries > 10 {
		return nil, fmt.Errorf("orders: close-trade retries %d out of [0, 10]", cfg.Retries)
	}
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = idleConnsPerHost
		client = &http.Client{Transport: tr}
	}
	// The retries are at most 10, so the doubling needs no cap of its own.
	retryWait := backoff.Exponential{Base: cfg.RetryWait, Jitter: backoff.EqualJitter}
	return &HTTPTradeCloser{cfg: cfg, client: client, retryWait: retryWait}, nil
}

// CloseIdleConnections closes the idle keep-alive connections of the
// HTTPTradeCloser's client.
func (h *HTTPTradeCloser) CloseIdleConnections() { h.client.CloseIdleConnections() }

// tradeRequest and tradeResponse are the wire bodies of a close-trade call.
type tradeRequest struct {
	OrderNo string `json:"orderNo"`
}

type tradeResponse struct {
	Result string `json:"result"`
}

var tradeResults = map[string]orders.TradeResult{
	"closed":       orders.TradeClosed,
	"already_paid": orders.TradeAlreadyPaid,
	"not_found":    orders.TradeNotFound,
}

// CloseTrade calls the payment side for orderNo, with retries (see the type).
func (h *HTTPTradeCloser) CloseTrade(ctx context.Context, orderNo string) (orders.TradeResult, error) {
	body, err := json.Marshal(tradeRequest{OrderNo: orderNo})
	if err != nil {
		return 0, err
	}
	var res orders.TradeResult
	err = backoff.Retry(ctx, h.retryWait, h.cfg.Retries+1, func(ctx context.Context, n int) (bool, error) {
		var retry bool
		var err error
		res, retry, err = h.attempt(ctx, body)
		if err != nil {
			return retry, fmt.Errorf("close trade of order %s (attempt %d): %w", orderNo, n, err)
		}
		return false, nil
	})
	if err != nil {
		return 0, err
	}
	return res, nil
}

// attempt makes one call. retry reports a failure worth repeating.
func (h *HTTPTradeCloser) attempt(ctx context.Context, body []byte) (res orders.TradeResult, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.cfg.Token != "" {
		req.Header.Set(h.cfg.TokenHeader, h.cfg.Token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, true, redact.Err(err) // the error repeats the URL, which may carry a token
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, true, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		s := resp.StatusCode
		return 0, s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500,
			fmt.Errorf("status %d: %s", s, sqlexec.Truncate(strings.TrimSpace(string(raw)), 200))
	}
	var tr tradeResponse
	if err := json.Unmarshal(raw, &tr); err != nil {
		return 0, false, fmt.Errorf("answer %q is not {\"result\": ...}: %w", sqlexec.Truncate(string(raw), 200), err)
	}
	res, ok := tradeResults[tr.Result]
	if !ok {
		return 0, false, fmt.Errorf("unknown result %q", tr.Result)
	}
	return res, false, nil
}
