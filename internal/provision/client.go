package provision

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/orderjob/executor/internal/redact"
)

// ClientConfig is how to reach and log into the admin console.
type ClientConfig struct {
	// Addresses are admin base URLs including the context path
	// (http://host:8080/xxl-job-admin), tried in order until one answers.
	Addresses []string
	// Username and Password of a console user with the admin role (group
	// endpoints require it). The password is never logged or printed.
	Username string
	Password string
	// Version is "auto" (or empty: detect), "2.x" (or "2.4"), "3.3", "3.4"
	// or "main" (the branch after 3.4).
	Version string
	// GroupToken is the executors' access token. The branch after 3.4 keeps
	// it on the executor group and lets executors register only with it, so
	// the group is created (and kept) with it there; older admins ignore it.
	GroupToken string
	// Timeout bounds each HTTP call. Default 3s.
	Timeout time.Duration
	// TLS is the TLS configuration for https admins. Default: the system's
	// roots.
	TLS *tls.Config
	// Logger receives the process log. Default: discard.
	Logger *slog.Logger
}

// Client talks to the admin's console endpoints as a logged-in user. It is
// not safe for concurrent use: a run is one sequence of calls.
type Client struct {
	cfg  ClientConfig
	http *http.Client
	log  *slog.Logger

	base    string   // the address in use, without trailing slash
	api     *flavour // nil until logged in
	renewed bool     // the one session renewal of this run is spent
	secrets []string // password and cookie values, scrubbed from any text we build
}

// NewClient checks cfg and returns a client that has not logged in yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	var problems []error
	if len(cfg.Addresses) == 0 {
		problems = append(problems, errors.New("no admin address"))
	}
	for _, a := range cfg.Addresses {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("admin address %q is not an http(s) URL", redact.URL(a)))
		}
	}
	if strings.TrimSpace(cfg.Username) == "" {
		problems = append(problems, errors.New("no console username (xxl.job.admin.username)"))
	}
	if cfg.Password == "" {
		problems = append(problems, errors.New("no console password (xxl.job.admin.password or XXL_JOB_ADMIN_PASSWORD)"))
	}
	cfg.Version = cmp.Or(cfg.Version, "auto")
	if cfg.Version != "auto" && flavourByName(cfg.Version) == nil {
		problems = append(problems, fmt.Errorf("admin version %q is not auto, 2.x, 3.3, 3.4 or main", cfg.Version))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("provision: %w", errors.Join(problems...))
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 3*time.Second)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	jar, _ := cookiejar.New(nil) // never fails without options
	// Its own transport, so Close drops exactly our connections.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	return &Client{
		cfg: cfg,
		http: &http.Client{
			Transport: tr,
			Jar:       jar,
			Timeout:   cfg.Timeout,
			// A redirect is the 2.x "not logged in" answer; following it
			// would turn it into a 200 HTML login page.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:     logger,
		secrets: slices.DeleteFunc([]string{cfg.Password, cfg.GroupToken}, func(s string) bool { return s == "" }),
	}, nil
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Version is the API generation in use ("2.4", "3.4" or "main"); empty
// before Login.
func (c *Client) Version() string {
	if c.api == nil {
		return ""
	}
	return c.api.name
}

// Base is the admin address in use; empty before Login.
func (c *Client) Base() string { return c.base }

// Login logs in at the first address that answers, detecting the API
// generation when configured "auto".
func (c *Client) Login(ctx context.Context) error {
	var errs []error
	for _, addr := range c.cfg.Addresses {
		base := strings.TrimRight(addr, "/")
		err := c.loginAt(ctx, base, flavourByName(c.cfg.Version))
		if err == nil {
			return nil
		}
		if !unreachable(err) || ctx.Err() != nil {
			return err // the admin answered: another address would not help
		}
		c.log.WarnContext(ctx, "admin unreachable, trying the next address", "admin", redact.URL(base), "err", err)
		errs = append(errs, err)
	}
	return fmt.Errorf("provision: no admin address answered: %w", errors.Join(errs...))
}

// loginAt logs in at base with api, or detects the generation when api is nil.
func (c *Client) loginAt(ctx context.Context, base string, api *flavour) error {
	if u, err := url.Parse(base); err == nil && u.Scheme == "http" && !isLoopback(u.Hostname()) {
		c.log.WarnContext(ctx, "admin address is plain http: the console password crosses the network unencrypted", "admin", redact.URL(base))
	}
	if api == nil {
		detected, err := c.detect(ctx, base)
		if err != nil {
			return err
		}
		c.base, c.api = base, detected
		c.log.InfoContext(ctx, "logged into the admin", "admin", redact.URL(base), "api", detected.name, "user", c.cfg.Username, "detected", true)
		return nil
	}
	a, err := c.postLogin(ctx, base, api.loginPath)
	if err != nil {
		return err
	}
	if err := c.loginResult(base, api, a); err != nil {
		return err
	}
	c.base, c.api = base, api
	c.log.InfoContext(ctx, "logged into the admin", "admin", redact.URL(base), "api", api.name, "user", c.cfg.Username)
	return nil
}

// detect follows the doc's probe: post the login form to /auth/doLogin; a
// JSON envelope there means 3.2+ (and we are now logged in), a 404 or a
// redirect means 2.x-3.1, where we log in at /login. On 3.2+ a job list
// whose payload carries `total` tells 3.3+ from 3.2.
func (c *Client) detect(ctx context.Context, base string) (*flavour, error) {
	a, err := c.postLogin(ctx, base, pathProbeLogin)
	if err != nil {
		return nil, err
	}
	if a.status == http.StatusNotFound || isRedirect(a.status) {
		b, err := c.postLogin(ctx, base, api24.loginPath)
		if err != nil {
			return nil, err
		}
		return api24, c.loginResult(base, api24, b)
	}
	if err := c.loginResult(base, api34, a); err != nil {
		return nil, err
	}
	// Logged in on 3.2+. 3.2 lists are bare tables; 3.3+ wrap them.
	form := api34.page(jobListForm(0, ""), 0, 1)
	api24.page(form, 0, 1)
	b, err := c.post(ctx, base, pathJobList, form)
	if err != nil {
		return nil, fmt.Errorf("POST %s (version probe): %w", pathJobList, err)
	}
	obj, ok := jsonObject(b.body)
	if ok && b.status == http.StatusOK {
		if _, bare := obj["recordsTotal"]; bare {
			return nil, errors.New("provision: the admin looks like XXL-JOB 3.2 (login at /auth/doLogin, bare list replies): " +
				"only 2.4.x and 3.3-3.4 are supported")
		}
		var payload struct {
			Total *int `json:"total"`
		}
		if code, _, _ := envelopeCode(obj); code == 200 && json.Unmarshal(obj["data"], &payload) == nil && payload.Total != nil {
			return c.detectMain(ctx, base)
		}
	}
	return nil, c.notUnderstood("POST "+pathJobList+" (version probe)", b)
}

// detectMain tells the branch after 3.4 from 3.3-3.4: it lists jobs with
// only 3.4's description filter, jobDesc. 3.4 answers; the branch after 3.4
// renamed the filter "name" and requires it, so Spring refuses, naming it.
func (c *Client) detectMain(ctx context.Context, base string) (*flavour, error) {
	form := jobListForm(0, "")
	form.Del("name")
	b, err := c.post(ctx, base, pathJobList, api34.page(form, 0, 1))
	if err != nil {
		return nil, fmt.Errorf("POST %s (version probe): %w", pathJobList, err)
	}
	if obj, ok := jsonObject(b.body); ok && b.status == http.StatusOK {
		code, msg, ok := envelopeCode(obj)
		switch {
		case ok && code == 200:
			return api34, nil
		case ok && strings.Contains(msg, "'name'"):
			return apiMain, nil
		}
	}
	return nil, c.notUnderstood("POST "+pathJobList+" (version probe)", b)
}

// postLogin posts the login form. Its request body and the response's
// cookies never reach a log or an error.
func (c *Client) postLogin(ctx context.Context, base, path string) (*answer, error) {
	form := url.Values{"userName": {c.cfg.Username}, "password": {c.cfg.Password}}
	a, err := c.post(ctx, base, path, form)
	if err != nil {
		return nil, fmt.Errorf("POST %s%s (login): %w", redact.URL(base), path, err)
	}
	for _, ck := range a.cookies {
		if ck.Value != "" {
			c.secrets = append(c.secrets, ck.Value, url.QueryEscape(ck.Value))
		}
	}
	return a, nil
}

func (c *Client) loginResult(base string, api *flavour, a *answer) error {
	call := "POST " + api.loginPath + " (login as " + c.cfg.Username + ")"
	obj, ok := jsonObject(a.body)
	if a.status != http.StatusOK || !ok {
		// Never echo a login answer's body: it may carry the token.
		return fmt.Errorf("provision: %s at %s: the answer was not understood: HTTP %d, %s, %d bytes",
			call, redact.URL(base), a.status, a.contentType, len(a.body))
	}
	code, msg, ok := envelopeCode(obj)
	if !ok {
		return fmt.Errorf("provision: %s at %s: the answer has no integer code", call, redact.URL(base))
	}
	if code != 200 {
		return &RefusedError{Call: call, Msg: c.scrub(msg)}
	}
	for _, ck := range a.cookies {
		if ck.Name == api.cookieName && ck.Value != "" {
			return nil
		}
	}
	return fmt.Errorf("provision: %s at %s: success but no %s cookie was set", call, redact.URL(base), api.cookieName)
}

// answer is one HTTP exchange, read whole.
type answer struct {
	status      int
	location    string
	contentType string
	body        []byte
	cookies     []*http.Cookie
}

const maxBody = 16 << 20

func (c *Client) post(ctx context.Context, base, path string, form url.Values) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, redact.Err(err) // the error repeats the URL: mask its password
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	c.log.DebugContext(ctx, "admin call", "path", path, "status", resp.StatusCode, "duration", time.Since(start))
	return &answer{
		status:      resp.StatusCode,
		location:    resp.Header.Get("Location"),
		contentType: resp.Header.Get("Content-Type"),
		body:        body,
		cookies:     resp.Cookies(),
	}, nil
}

// call posts form to path as the logged-in user. If the session turns out to
// be gone (the check runs before the handler, so nothing was changed), it
// logs in again and repeats the call: once per run.
func (c *Client) call(ctx context.Context, path string, form url.Values) (*answer, error) {
	if c.api == nil {
		return nil, errors.New("provision: not logged in")
	}
	for {
		a, err := c.post(ctx, c.base, path, form)
		if err != nil {
			return nil, fmt.Errorf("POST %s: %w", path, err)
		}
		if !c.sessionLost(a) {
			return a, nil
		}
		if c.renewed {
			return nil, fmt.Errorf("provision: POST %s: the admin session was lost again after being renewed once "+
				"(on 3.2+ another login by %q ends ours: give provisioning its own console user)", path, c.cfg.Username)
		}
		c.renewed = true
		c.log.WarnContext(ctx, "admin session lost; logging in again", "path", path)
		if err := c.loginAt(ctx, c.base, c.api); err != nil {
			return nil, fmt.Errorf("renew the admin session: %w", err)
		}
	}
}

// sessionLost reports the "not logged in" answers: a redirect to the login
// page (2.x; 3.2+ page calls), or on 3.2+ a failure envelope whose message
// says "not login" (the one text we must recognise: it has no code of its own).
func (c *Client) sessionLost(a *answer) bool {
	if isRedirect(a.status) {
		loc := a.location
		if u, err := url.Parse(loc); err == nil {
			loc = u.Path
		}
		return strings.HasSuffix(loc, "/toLogin") || strings.HasSuffix(loc, "/auth/login")
	}
	if c.api.name == api24.name || a.status != http.StatusOK {
		return false
	}
	obj, ok := jsonObject(a.body)
	if !ok {
		return false
	}
	code, msg, ok := envelopeCode(obj)
	return ok && code != 200 && strings.Contains(msg, "not login")
}

// unreachable reports a failure to reach the admin at all (refused, reset,
// timed out), as opposed to an answer we did not like.
func unreachable(err error) bool {
	var oe *net.OpError
	var ne net.Error
	return errors.As(err, &oe) || errors.As(err, &ne) && ne.Timeout()
}

func isRedirect(status int) bool { return status >= 300 && status < 400 }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
