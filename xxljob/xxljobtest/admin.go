// Package xxljobtest is a test double of an XXL-JOB admin ("scheduling
// center") for testing code built on package xxljob. It speaks each admin
// generation's wire dialect as read from xuxueli/xxl-job's sources: 2.3 to
// 2.5 (V24), 3.3 (V33), 3.4 (V34) and the branch after 3.4 at commit
// xxljob.MainCommit (Main).
//
// Admin is the executor → admin side: an httptest server answering
// {base}/api/registry, /api/registryRemove and /api/callback with the
// admin's checks (the access token; in Main the executor group's token found
// by the XXL-JOB-APPNAME header) and Jackson-style envelopes
// ({"code":200,"msg":null,"content":null} in 2.x, {"code":200,"msg":"Success",
// "data":null,"success":true} in 3.x), recording what it received, and
// switchable down (HTTP 503, dropped connections, or hanging without an
// answer) and up again.
//
// Client is the admin → executor side: it sends /beat, /idleBeat, /run (in
// Main /trigger), /kill and /log exactly as that admin does (headers, bodies,
// field names and order) and decodes the answers; PageLog reads a run log
// the way the admin's log page polls it.
//
// The package is for tests only.
package xxljobtest

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
	V24  Version = iota // 2.3.x–2.5.0: envelope {code,msg,content}, /beat body ""
	V33                 // 3.3.x: envelope {code,msg,data}, no /beat body, token header required
	V34                 // 3.4.x: as 3.3, the token header optional
	Main                // the branch after 3.4: /trigger, group tokens, callbackList, logDateTime
)

func (v Version) String() string { return [...]string{"2.4", "3.3", "3.4", "main"}[v] }

// v3 reports the Response envelope ({code,msg,data,success}).
func (v Version) v3() bool { return v >= V33 }

// Mode is how the fake admin answers.
type Mode int

const (
	Up        Mode = iota // normal
	Down503               // HTTP 503 to everything
	DownClose             // the connection is closed without an answer
	Hang                  // the request is read, never answered, and not recorded
)

// Options configures an Admin.
type Options struct {
	// Token is the admin's accessToken (2.x-3.4); "" disables the check.
	Token string
	// Groups are the executor groups of a Main admin, appname to token: its
	// /api/* answers only a known appname with that group's token.
	Groups map[string]string
	// ContextPath is the servlet context path; default "/xxl-job-admin",
	// "/" for the server root (3.4.1 and later).
	ContextPath string
	// Version is the wire generation; default V24.
	Version Version
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
	LogDateTim int64           `json:"logDateTim"` // logDateTime in Main, copied here
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
	unhang        chan struct{} // closed when a Hang mode ends
	closed        chan struct{}
	groups        map[string]string
	registrations []Registry
	removals      []Registry
	callbacks     []Callback
	byLog         map[int64]int
	repeats       map[int64]int
	batches       int
	requests      []Request
	hanging       int           // requests held unanswered now (Hang)
	changed       chan struct{} // closed and replaced on every recorded change
}

// New starts a fake admin; it is closed when the test ends.
func New(tb testing.TB, opts Options) *Admin {
	tb.Helper()
	if opts.ContextPath == "" {
		opts.ContextPath = "/xxl-job-admin"
	}
	opts.ContextPath = "/" + strings.Trim(opts.ContextPath, "/")
	if opts.ContextPath == "/" { // 3.4.1 and later: the admin at the server root
		opts.ContextPath = ""
	}
	a := &Admin{opts: opts, byLog: map[int64]int{}, repeats: map[int64]int{}, changed: make(chan struct{}),
		unhang: make(chan struct{}), closed: make(chan struct{}), groups: map[string]string{}}
	for k, v := range opts.Groups {
		a.groups[k] = v
	}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL + opts.ContextPath
	tb.Cleanup(a.Close)
	return a
}

// Close stops the server; hanging requests are let go first.
func (a *Admin) Close() {
	a.mu.Lock()
	select {
	case <-a.closed:
	default:
		close(a.closed)
	}
	a.mu.Unlock()
	a.srv.Close()
}

// SetMode switches the admin down or up.
func (a *Admin) SetMode(m Mode) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mode == Hang && m != Hang {
		close(a.unhang)
		a.unhang = make(chan struct{})
	}
	a.mode = m
}

// SetGroup creates or changes an executor group of a Main admin, as the
// console (or `executor provision`) does. The real admin takes up to 30 s to
// see it (its group cache); this one sees it at once.
func (a *Admin) SetGroup(appname, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.groups[appname] = token
}

func (a *Admin) serve(w http.ResponseWriter, r *http.Request) {
	if a.serveFault(w, r) {
		return
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
	if a.refuse(w, r, uri, body) {
		return
	}
	switch uri {
	case "callback":
		a.serveCallback(w, body)
	case "registry", "registryRemove":
		a.serveRegistry(w, uri, body)
	default:
		a.reply(w, 500, "invalid request, uri-mapping("+uri+") not found.")
	}
}

// serveFault answers as the Mode set says (hang, 503, close the
// connection) and reports whether it did.
func (a *Admin) serveFault(w http.ResponseWriter, r *http.Request) bool {
	a.mu.Lock()
	mode, unhang := a.mode, a.unhang
	a.mu.Unlock()
	switch mode {
	case Hang:
		_, _ = io.Copy(io.Discard, r.Body)
		a.held(1)
		defer a.held(-1)
		select { // then the client's timeout ends it, or the mode changes
		case <-unhang:
		case <-a.closed:
		case <-r.Context().Done():
		}
		panic(http.ErrAbortHandler) // a hung request is never answered

	case Down503:
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return true
	case DownClose:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return true
			}
		}
		panic(http.ErrAbortHandler)
	}
	return false
}

// refuse runs the admin's API controller's checks, in its order, and
// reports whether one refused the request (and answered it).
func (a *Admin) refuse(w http.ResponseWriter, r *http.Request, uri string, body []byte) bool {
	switch {
	case r.Method != http.MethodPost:
		a.reply(w, 500, "invalid request, HttpMethod not support.")
	case uri == "":
		a.reply(w, 500, "invalid request, uri-mapping empty.")
	case a.opts.Version == V33 && len(r.Header.Values("XXL-JOB-ACCESS-TOKEN")) == 0:
		// 3.3.0/3.3.1 declare the header required: Spring answers 400.
		http.Error(w, "Required request header 'XXL-JOB-ACCESS-TOKEN' is not present", http.StatusBadRequest)
	case a.opts.Version.v3() && blank(string(body)):
		a.reply(w, 500, "invalid request, requestBody empty.")
	default:
		if msg := a.authorize(r.Header); msg != "" {
			a.reply(w, 500, msg)
			return true
		}
		return false
	}
	return true
}

// serveCallback records the run results of a callback.
func (a *Admin) serveCallback(w http.ResponseWriter, body []byte) {
	items, err := a.callbackItems(body)
	if err != nil {
		if a.opts.Version.v3() {
			a.reply(w, 500, "openapi invoke error: "+err.Error())
		} else {
			http.Error(w, "callback body: "+err.Error(), http.StatusInternalServerError) // Spring error page
		}
		return
	}
	if err := a.addCallbacks(items); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	a.reply(w, 200, "")
}

// serveRegistry records a registration (uri "registry") or a removal.
func (a *Admin) serveRegistry(w http.ResponseWriter, uri string, body []byte) {
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
}

// authorize is the token check: one admin token up to 3.4 (only when set),
// the executor group's own token in Main.
func (a *Admin) authorize(h http.Header) string {
	token := h.Get("XXL-JOB-ACCESS-TOKEN")
	if a.opts.Version != Main {
		if strings.TrimSpace(a.opts.Token) != "" && token != a.opts.Token {
			return "The access token is wrong."
		}
		return ""
	}
	appname := h.Get("XXL-JOB-APPNAME")
	if blank(token) || blank(appname) {
		return "invalid request, accessToken or appname is empty."
	}
	a.mu.Lock()
	want, ok := a.groups[appname]
	a.mu.Unlock()
	if !ok || token != want {
		return "invalid request, accessToken or appname invalid."
	}
	return ""
}

// callbackItems returns the results of a callback body: a JSON array up to
// 3.4, an object {"callbackList":[...]} in Main.
func (a *Admin) callbackItems(body []byte) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if a.opts.Version != Main {
		err := json.Unmarshal(body, &items)
		return items, err
	}
	var req struct {
		CallbackList []json.RawMessage `json:"callbackList"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	return req.CallbackList, nil
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// reply writes the admin's envelope as Jackson writes it: nulls included,
// and in 3.x the isSuccess() getter as "success" and "Success" as the msg of
// Response.ofSuccess().
func (a *Admin) reply(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	if a.opts.Version.v3() {
		if code == 200 && msg == "" {
			msg = "Success"
		}
		m, _ := json.Marshal(msg)
		fmt.Fprintf(w, `{"code":%d,"msg":%s,"data":null,"success":%t}`, code, m, code == 200)
		return
	}
	m := "null"
	if msg != "" {
		b, _ := json.Marshal(msg)
		m = string(b)
	}
	fmt.Fprintf(w, `{"code":%d,"msg":%s,"content":null}`, code, m)
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
		if a.opts.Version == Main {
			var m struct {
				LogDateTime int64 `json:"logDateTime"`
			}
			_ = json.Unmarshal(raw, &m)
			c.LogDateTim = m.LogDateTime
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

// held counts a request held unanswered in Hang mode (+1) or let go (-1).
func (a *Admin) held(d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hanging += d
	a.notifyLocked()
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
		return c, fmt.Errorf("xxljobtest: no callback for logId %d: %w", logID, err)
	}
	return c, nil
}

// WaitRegistrations waits until at least n registry calls arrived.
func (a *Admin) WaitRegistrations(n int, timeout time.Duration) ([]Registry, error) {
	err := a.wait(timeout, func() bool { return len(a.registrations) >= n })
	if err != nil {
		return a.Registrations(), fmt.Errorf("xxljobtest: fewer than %d registrations: %w", n, err)
	}
	return a.Registrations(), nil
}

// WaitRemovals waits until at least n registryRemove calls arrived.
func (a *Admin) WaitRemovals(n int, timeout time.Duration) ([]Registry, error) {
	err := a.wait(timeout, func() bool { return len(a.removals) >= n })
	if err != nil {
		return a.Removals(), fmt.Errorf("xxljobtest: fewer than %d removals: %w", n, err)
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
