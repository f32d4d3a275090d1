// Package fakeconsole is a test helper: an in-memory XXL-JOB admin console
// served by httptest, following shared/docs/xxl-job-admin-api.md for 2.4.x
// and 3.4.x, and xuxueli/xxl-job's branch after 3.4 at commit 128dd678
// (group title and job description both renamed "name", a token per
// executor group, unique appnames). It answers the console endpoints `executor provision` and
// `executor trigger` use, with each version's paths, envelope, list shape,
// paging parameters, login and "not logged in" answers, validates forms as
// the admin does (failure texts in Chinese, the admin's default locale), and
// records every request so tests can assert on writes.
//
// Runs are scripted, not timed: a trigger creates log rows whose lines are
// handed out one per /joblog/logDetailCat call, and a row finishes when its
// last line has been read. Nothing sleeps.
//
// Import it only from _test.go files.
package fakeconsole

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Version is the admin generation the console imitates.
type Version string

// Supported versions.
const (
	V24   Version = "2.4"  // context path /xxl-job-admin
	V34   Version = "3.4"  // 3.4.1+: context path /
	VMain Version = "main" // the branch after 3.4: as 3.4, plus the renames and group tokens
)

// Options configure a Console. Zero values take the defaults.
type Options struct {
	Version  Version // default V24
	Username string  // default "admin"
	Password string  // default "123456"
	// NormalUser makes the account role 0: group endpoints refuse it.
	NormalUser bool
}

// Group is an executor group as stored.
type Group struct {
	ID          int
	AppName     string
	Title       string // "name" on the branch after 3.4
	AddressType int
	AddressList string
	AccessToken string // the branch after 3.4 only
}

// Job is a job as stored.
type Job struct {
	ID                     int
	JobGroup               int
	JobDesc                string
	Author                 string
	AlarmEmail             string
	ScheduleType           string
	ScheduleConf           string
	MisfireStrategy        string
	ExecutorRouteStrategy  string
	ExecutorHandler        string
	ExecutorParam          string
	ExecutorBlockStrategy  string
	ExecutorTimeout        int
	ExecutorFailRetryCount int
	ChildJobID             string
	GlueType               string
	TriggerStatus          int
}

// Run scripts the runs that later triggers create.
type Run struct {
	Lines      []string // log lines, one handed out per logDetailCat call
	HandleCode int      // result once the lines are read; default 200
	HandleMsg  string
	Shards     int    // > 1: a broadcast run with this many rows
	TriggerMsg string // non-empty: the trigger fails (triggerCode 500) with this text
}

// Log is a run's log row as stored.
type Log struct {
	ID                    int64
	JobGroup              int
	JobID                 int
	ExecutorAddress       string
	ExecutorHandler       string
	ExecutorParam         string
	ExecutorShardingParam string
	TriggerCode           int
	TriggerMsg            string
	HandleCode            int
	HandleMsg             string

	lines  []string
	result Run
}

// Request is one recorded request, path without the context path.
type Request struct {
	Path   string
	Form   url.Values
	Authed bool // sent with a valid session
}

// Console is the fake admin.
type Console struct {
	srv  *httptest.Server
	opts Options
	ctx  string // context path
	names

	mu       sync.Mutex
	groups   []*Group
	jobs     []*Job
	logs     []*Log
	nextID   int
	nextLog  int64
	tokens   map[string]bool // valid session cookie values
	issued   []string
	logins   int
	requests []Request
	run      Run
	hook     func(path string)
}

// New starts a console and closes it when the test ends.
func New(t testing.TB, opts Options) *Console {
	t.Helper()
	if opts.Version == "" {
		opts.Version = V24
	}
	if opts.Username == "" {
		opts.Username = "admin"
	}
	if opts.Password == "" {
		opts.Password = "123456"
	}
	c := &Console{opts: opts, nextID: 100, nextLog: 1000, tokens: map[string]bool{}, run: Run{HandleCode: 200}}
	if opts.Version == V24 {
		c.ctx = "/xxl-job-admin"
	}
	c.names = namesOf(opts.Version)
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

// URL is the admin base URL, context path included.
func (c *Console) URL() string { return c.srv.URL + c.ctx }

// AddGroup stores a group and returns its id.
func (c *Console) AddGroup(g Group) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	g.ID = c.nextID
	c.groups = append(c.groups, &g)
	return g.ID
}

// AddJob stores a job as is (glue type BEAN if empty) and returns its id.
func (c *Console) AddJob(j Job) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	j.ID = c.nextID
	if j.GlueType == "" {
		j.GlueType = "BEAN"
	}
	c.jobs = append(c.jobs, &j)
	return j.ID
}

// Groups returns a copy of the stored groups.
func (c *Console) Groups() []Group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copies(c.groups)
}

// Jobs returns a copy of the stored jobs, by id.
func (c *Console) Jobs() []Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copies(c.jobs)
}

// Logs returns a copy of the stored log rows, by id.
func (c *Console) Logs() []Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	return copies(c.logs)
}

// copies returns the values rows point to.
func copies[T any](rows []*T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out
}

// SetJob changes a stored job, as a person in the console would.
func (c *Console) SetJob(id int, change func(*Job)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.job(id); j != nil {
		change(j)
	}
}

// SetGroupToken changes a stored group's access token, as a person in the
// console would.
func (c *Console) SetGroupToken(id int, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		if g.ID == id {
			g.AccessToken = token
		}
	}
}

// ScriptRuns sets the outcome of the runs later triggers create.
func (c *Console) ScriptRuns(r Run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.HandleCode == 0 {
		r.HandleCode = 200
	}
	c.run = r
}

// Requests returns every request so far.
func (c *Console) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

// writePaths are the endpoints that change something.
var writePaths = []string{
	"/jobgroup/save", "/jobgroup/insert", "/jobgroup/update", "/jobgroup/remove", "/jobgroup/delete",
	"/jobinfo/add", "/jobinfo/insert", "/jobinfo/update", "/jobinfo/remove", "/jobinfo/delete",
	"/jobinfo/start", "/jobinfo/stop", "/jobinfo/trigger",
}

// Writes returns the requests to write endpoints made with a valid session.
func (c *Console) Writes() []Request {
	var out []Request
	for _, r := range c.Requests() {
		if r.Authed && slices.Contains(writePaths, r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// ExpireSessions invalidates every session, as a password change (2.x) or
// another login of the same user (3.2+) does.
func (c *Console) ExpireSessions() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.tokens)
}

// OnRequest sets a function called with each request's path before it is
// handled (outside the console's lock: it may call ExpireSessions).
func (c *Console) OnRequest(fn func(path string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = fn
}

// Secrets returns the password and every session cookie value issued: what
// must never show in a client's output.
func (c *Console) Secrets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string{c.opts.Password}, c.issued...)
}

// Logins counts successful logins.
func (c *Console) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logins
}

// names are what a version calls the group title and the job
// description (both renamed "name" on the branch after 3.4), its session
// cookie and its login path (2.4's own).
type names struct{ titleKey, descKey, cookieName, loginPath string }

func namesOf(v Version) names {
	n := names{titleKey: "title", descKey: "jobDesc", cookieName: "xxl_job_login_token", loginPath: "/auth/doLogin"}
	switch v {
	case V24:
		n.cookieName, n.loginPath = "XXL_JOB_LOGIN_IDENTITY", "/login"
	case VMain:
		n.titleKey, n.descKey = "name", "name"
	}
	return n
}

// serve routes one request.
func (c *Console) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, c.ctx)
	if !ok || path == "" {
		http.NotFound(w, r)
		return
	}
	c.mu.Lock()
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(path)
	}
	_ = r.ParseForm()

	c.mu.Lock()
	defer c.mu.Unlock()
	authed := false
	if ck, err := r.Cookie(c.cookieName); err == nil {
		authed = c.tokens[ck.Value]
	}
	c.requests = append(c.requests, Request{Path: path, Form: r.Form, Authed: authed})

	if path == c.loginPath {
		if r.Method != http.MethodPost {
			http.Error(w, "Request method 'GET' not supported", http.StatusMethodNotAllowed)
			return
		}
		c.login(w, r.Form)
		return
	}
	h, known := c.routes()[path]
	if !known {
		http.NotFound(w, r)
		return
	}
	if !authed {
		if c.opts.Version == V24 {
			http.Redirect(w, r, c.ctx+"/toLogin", http.StatusFound)
			return
		}
		c.fail(w, "not login for path:"+path)
		return
	}
	if strings.HasPrefix(path, "/jobgroup/") && c.opts.NormalUser {
		c.fail(w, "java.lang.RuntimeException: 权限拦截")
		return
	}
	h(w, r.Form)
}

func (c *Console) login(w http.ResponseWriter, form url.Values) {
	user, pass := form.Get("userName"), form.Get("password")
	if user == "" || pass == "" {
		c.fail(w, "账号或密码为空")
		return
	}
	if user != c.opts.Username || pass != c.opts.Password {
		c.fail(w, "账号或密码错误")
		return
	}
	var token string
	if c.opts.Version == V24 {
		// Like 2.x: hex of the user row, the password's MD5 inside.
		sum := md5.Sum([]byte(pass))
		row, _ := json.Marshal(map[string]any{"id": 1, "username": user, "password": hex.EncodeToString(sum[:]), "role": 1})
		token = hex.EncodeToString(row)
	} else {
		// Like xxl-sso: a fresh signature; a new login ends older sessions.
		sig := make([]byte, 16)
		_, _ = rand.Read(sig)
		row, _ := json.Marshal(map[string]any{"userId": "1", "signature": hex.EncodeToString(sig)})
		token = base64.URLEncoding.EncodeToString(row)
		clear(c.tokens)
	}
	c.tokens[token] = true
	c.issued = append(c.issued, token)
	c.logins++
	http.SetCookie(w, &http.Cookie{Name: c.cookieName, Value: token, Path: "/", HttpOnly: true})
	msg := any(nil)
	if c.opts.Version != V24 {
		msg = "Success"
	}
	c.envelope(w, 200, msg, nil)
}

// envelope writes ReturnT (2.4: content) or Response (3.4: data, success).
func (c *Console) envelope(w http.ResponseWriter, code int, msg, payload any) {
	body := map[string]any{"code": code, "msg": msg}
	if c.opts.Version == V24 {
		body["content"] = payload
	} else {
		body["data"] = payload
		body["success"] = code == 200
	}
	writeJSON(w, http.StatusOK, body)
}

func (c *Console) ok(w http.ResponseWriter, payload any) { c.envelope(w, 200, nil, payload) }

func (c *Console) fail(w http.ResponseWriter, msg string) { c.envelope(w, 500, msg, nil) }

// table writes a list reply: bare in 2.4, wrapped in 3.4.
func (c *Console) table(w http.ResponseWriter, rows []any, total, offset, size int) {
	if rows == nil {
		rows = []any{}
	}
	if c.opts.Version == V24 {
		writeJSON(w, http.StatusOK, map[string]any{"recordsTotal": total, "recordsFiltered": total, "data": rows})
		return
	}
	c.ok(w, map[string]any{"data": rows, "total": total, "offset": offset, "pagesize": size})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// missing is Spring's answer to a missing required parameter.
func (c *Console) missing(w http.ResponseWriter, name, typ string) {
	c.fail(w, fmt.Sprintf("Required request parameter '%s' for method parameter type %s is not present", name, typ))
}

// badRequest is Spring's binder failing on a non-numeric int field: no envelope.
func badRequest(w http.ResponseWriter, path string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"status": 400, "error": "Bad Request", "path": path})
}
