// Package fakeadmin is a test double of an XXL-JOB admin ("scheduling
// center"), faithful to the wire protocol of xxl-job-admin 2.4.x (and, with
// V34, the 3.4.x envelope) as described in docs/xxl-job-protocol.md.
//
// Admin is the executor → admin side: an httptest server answering
// {base}/api/registry, /api/registryRemove and /api/callback with the admin's
// token check and Jackson-style envelopes ({"code":200,"msg":null,
// "content":null}), recording what it received, and switchable down (HTTP 503
// or dropped connections) and up again.
//
// Client is the admin → executor side: it sends /beat, /idleBeat, /run, /kill
// and /log exactly as the admin does (headers, the "" beat body, TriggerParam
// field names and order) and decodes the answers; PageLog reads a run log the
// way the admin's log page polls it.
//
// The package is for tests only.
package fakeadmin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version selects the admin generation whose wire format is spoken.
type Version int

const (
	V24 Version = iota // 2.3.x–2.5.0: envelope {code,msg,content}, /beat body ""
	V34                // 3.3.x–3.4.x: envelope {code,msg,data}, no /beat body
)

// Mode is how the fake admin answers.
type Mode int

const (
	Up        Mode = iota // normal
	Down503               // HTTP 503 to everything
	DownClose             // the connection is closed without an answer
)

// Options configures an Admin.
type Options struct {
	Token       string  // the admin's accessToken; "" disables the check
	ContextPath string  // servlet context path; default "/xxl-job-admin"
	Version     Version // wire generation; default V24
}

// Registry is one received RegistryParam.
type Registry struct {
	RegistryGroup string `json:"registryGroup"`
	RegistryKey   string `json:"registryKey"`
	RegistryValue string `json:"registryValue"`
}

// Callback is the first callback received for a logId.
type Callback struct {
	LogID      int64           `json:"logId"`
	LogDateTim int64           `json:"logDateTim"`
	HandleCode int             `json:"handleCode"`
	HandleMsg  string          `json:"handleMsg"`
	Raw        json.RawMessage `json:"-"` // the item exactly as received
}

// Request is one request the admin served.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Admin is a running fake admin. Its methods are safe for concurrent use.
type Admin struct {
	// URL is the admin base URL including the context path, as an executor
	// is configured with it.
	URL string

	opts Options
	srv  *httptest.Server

	mu            sync.Mutex
	mode          Mode
	registrations []Registry
	removals      []Registry
	callbacks     []Callback
	byLog         map[int64]int
	repeats       map[int64]int
	batches       int
	requests      []Request
	changed       chan struct{} // closed and replaced on every recorded change
}

// New starts a fake admin; it is closed when the test ends.
func New(tb testing.TB, opts Options) *Admin {
	tb.Helper()
	if opts.ContextPath == "" {
		opts.ContextPath = "/xxl-job-admin"
	}
	opts.ContextPath = "/" + strings.Trim(opts.ContextPath, "/")
	a := &Admin{opts: opts, byLog: map[int64]int{}, repeats: map[int64]int{}, changed: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL + opts.ContextPath
	tb.Cleanup(a.Close)
	return a
}

// Close stops the server.
func (a *Admin) Close() { a.srv.Close() }

// SetMode switches the admin down or up.
func (a *Admin) SetMode(m Mode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mode = m
}

func (a *Admin) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	mode := a.mode
	a.mu.Unlock()
	switch mode {
	case Down503:
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	case DownClose:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}

	prefix := a.opts.ContextPath + "/api/"
	if !strings.HasPrefix(r.URL.Path, prefix) {
		http.NotFound(w, r) // outside the API: the admin's own 404 page
		return
	}
	uri := strings.TrimPrefix(r.URL.Path, prefix)
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.record(Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})

	// JobApiController.api, in its order.
	if r.Method != http.MethodPost {
		a.reply(w, 500, "invalid request, HttpMethod not support.")
		return
	}
	if uri == "" {
		a.reply(w, 500, "invalid request, uri-mapping empty.")
		return
	}
	if strings.TrimSpace(a.opts.Token) != "" && r.Header.Get("XXL-JOB-ACCESS-TOKEN") != a.opts.Token {
		a.reply(w, 500, "The access token is wrong.")
		return
	}
	if a.opts.Version == V34 && len(strings.TrimSpace(string(body))) == 0 {
		a.reply(w, 500, "request body is blank")
		return
	}
	switch uri {
	case "callback":
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			http.Error(w, "callback body: "+err.Error(), http.StatusInternalServerError) // Spring error page
			return
		}
		if err := a.addCallbacks(items); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		a.reply(w, 200, "")
	case "registry", "registryRemove":
		var p Registry
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "registry body: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if blank(p.RegistryGroup) || blank(p.RegistryKey) || blank(p.RegistryValue) {
			a.reply(w, 500, "Illegal Argument.")
			return
		}
		a.mu.Lock()
		if uri == "registry" {
			a.registrations = append(a.registrations, p)
		} else {
			a.removals = append(a.removals, p)
		}
		a.notifyLocked()
		a.mu.Unlock()
		a.reply(w, 200, "")
	default:
		a.reply(w, 500, "invalid request, uri-mapping("+uri+") not found.")
	}
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// reply writes the admin's envelope, nulls included (Jackson).
func (a *Admin) reply(w http.ResponseWriter, code int, msg string) {
	m := "null"
	if msg != "" {
		b, _ := json.Marshal(msg)
		m = string(b)
	}
	field := "content"
	if a.opts.Version == V34 {
		field = "data"
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	fmt.Fprintf(w, `{"code":%d,"msg":%s,"%s":null}`, code, m, field)
}

func (a *Admin) record(r Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, r)
}

// addCallbacks applies the admin's rule: unknown fields ignored, the first
// callback of a logId wins, later ones are counted as repeats.
func (a *Admin) addCallbacks(items []json.RawMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches++
	for _, raw := range items {
		var c Callback
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("callback item: %w", err)
		}
		c.Raw = append(json.RawMessage(nil), raw...)
		if _, seen := a.byLog[c.LogID]; seen {
			a.repeats[c.LogID]++
			continue
		}
		a.byLog[c.LogID] = len(a.callbacks)
		a.callbacks = append(a.callbacks, c)
	}
	a.notifyLocked()
	return nil
}

func (a *Admin) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// Registrations returns the registry calls received, in order.
func (a *Admin) Registrations() []Registry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Registry(nil), a.registrations...)
}

// Removals returns the registryRemove calls received, in order.
func (a *Admin) Removals() []Registry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Registry(nil), a.removals...)
}

// Callbacks returns the first callback of each logId, in arrival order.
func (a *Admin) Callbacks() []Callback {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Callback(nil), a.callbacks...)
}

// Callback returns the first callback received for logID.
func (a *Admin) Callback(logID int64) (Callback, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.byLog[logID]
	if !ok {
		return Callback{}, false
	}
	return a.callbacks[i], true
}

// Repeats returns how many callbacks for logID came after the first.
func (a *Admin) Repeats(logID int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.repeats[logID]
}

// CallbackBatches returns how many /api/callback requests were accepted.
func (a *Admin) CallbackBatches() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.batches
}

// Requests returns every request served while up, in order.
func (a *Admin) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.requests...)
}

// WaitCallback waits until a callback for logID arrived.
func (a *Admin) WaitCallback(logID int64, timeout time.Duration) (Callback, error) {
	var c Callback
	err := a.wait(timeout, func() bool {
		i, ok := a.byLog[logID]
		if ok {
			c = a.callbacks[i]
		}
		return ok
	})
	if err != nil {
		return c, fmt.Errorf("fakeadmin: no callback for logId %d: %w", logID, err)
	}
	return c, nil
}

// WaitRegistrations waits until at least n registry calls arrived.
func (a *Admin) WaitRegistrations(n int, timeout time.Duration) ([]Registry, error) {
	err := a.wait(timeout, func() bool { return len(a.registrations) >= n })
	if err != nil {
		return a.Registrations(), fmt.Errorf("fakeadmin: fewer than %d registrations: %w", n, err)
	}
	return a.Registrations(), nil
}

// WaitRemovals waits until at least n registryRemove calls arrived.
func (a *Admin) WaitRemovals(n int, timeout time.Duration) ([]Registry, error) {
	err := a.wait(timeout, func() bool { return len(a.removals) >= n })
	if err != nil {
		return a.Removals(), fmt.Errorf("fakeadmin: fewer than %d removals: %w", n, err)
	}
	return a.Removals(), nil
}

// wait runs cond under the lock after every change until it holds.
func (a *Admin) wait(timeout time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		ok, ch := cond(), a.changed
		a.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("timeout after %s", timeout)
		}
	}
}
