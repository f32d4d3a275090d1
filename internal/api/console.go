package api

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/xxljob/authguard"
)

// The operator console: server-rendered pages under /console/ on the API
// port, for what the job left behind (dead letters, delayed tasks, outbox
// events, refunds owed, fulfilment flags) and the actions that fix it. No
// JavaScript and nothing fetched from elsewhere: the templates and the
// style sheet are embedded, and the pages work on a phone's screen.
//
// Operators sign in with a personal token (api.consoleTokens, name:token);
// the session is a signed cookie (console_auth.go), every state change is a
// POST carrying a CSRF token, first answered with a confirmation and then
// with what it changed. Each action runs the same domain call as the CLI
// and the JSON API, and is logged with the operator's name.

//go:embed console
var consoleFiles embed.FS

// ConsoleConfig configures the console.
type ConsoleConfig struct {
	// Operators sign in with their tokens. None: the console answers every
	// page with why it is off.
	Operators []Operator
	// Session is how long a sign-in lasts. Default 8h.
	Session time.Duration
	// DB is mysql.dsn's database. Required.
	DB *sqlx.DB
	// Due are the close's units whose due orders the overview of
	// mysql.dsn's database counts (the units on its order table) unless a
	// source is Home (its View counts them); none: the card says so.
	Due []inspect.Unit
	// Sources are the order databases of order.sources, which the pages
	// reading order data offer by name (?source=); none: DB alone, and no
	// choice is shown.
	Sources []ConsoleSource
	// Tasks reads and acts on the delayed tasks of mysql.dsn's database;
	// nil leaves the task pages out (each ConsoleSource's Tasks too).
	Tasks *delay.Client
	// Schema is the shop's declared order schema (order.schema.table):
	// without a source on DB (Sources' Home), the order view looks orders
	// up in its order table by the names it gives the columns. Zero (or
	// not Declared): the executor's own order_info.
	Schema schema.Schema
	// Mode is the close path's compensation mode (the order page shows
	// stock and coupons in local mode, outbox events in outbox mode).
	Mode orders.CompensationMode
	// Now is the clock of sessions. Default time.Now.
	Now func() time.Time
}

// Operator is one console user.
type Operator struct {
	Name, Token string
}

// Console serves /console/.
type Console struct {
	cfg      ConsoleConfig
	log      *slog.Logger
	pages    map[string]*template.Template
	pristine map[string]*template.Template // never executed: cloned for a page of a source
	sessions *sessions                     // nil when the console is off
	guard    *authguard.Guard
	views    Sourced[*orderViews]
	sources  []string // the names of order.sources, in order
	offWhy   string
}

// consolePath is where the console lives; its cookie is scoped to it.
const consolePath = "/console/"

// MountConsole mounts the console under /console/. Its pages carry their
// own sign-in (a browser cannot send the API's token header), so they are
// mounted without the port's token check.
func (s *Server) MountConsole(cfg ConsoleConfig) error {
	c, err := NewConsole(cfg, s.base)
	if err != nil {
		return err
	}
	c.guard = newGuard(s.cfg, "console", c.log)
	s.HandlePublic(consolePath, c)
	return nil
}

// NewConsole checks cfg and builds the console. A nil logger discards.
func NewConsole(cfg ConsoleConfig, log *slog.Logger) (*Console, error) {
	if cfg.DB == nil {
		return nil, errors.New("api: ConsoleConfig.DB is required")
	}
	if cfg.Session == 0 {
		cfg.Session = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, log: log.With("component", "api.console")}
	c.guard = newGuard(Config{}, "console", c.log)
	var err error
	if c.views, c.sources, err = consoleViews(cfg); err != nil {
		return nil, err
	}
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	if c.pristine, err = parsePages(); err != nil {
		return nil, err
	}
	if len(cfg.Operators) == 0 {
		c.offWhy = "api.consoleTokens is empty: no operator can sign in. Give each operator a personal token " +
			"(EXECUTOR_API_CONSOLE_TOKENS=alice:<at least 16 characters>,bob:...) and restart."
		return c, nil
	}
	if c.sessions, err = newSessions(cfg.Operators, cfg.Session, cfg.Now); err != nil {
		return nil, err
	}
	return c, nil
}

// ServeHTTP routes a console request.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	if strings.HasPrefix(r.URL.Path, consolePath+"static/") {
		c.static(w, r)
		return
	}
	if c.sessions == nil {
		c.render(w, r, http.StatusServiceUnavailable, "off", nil, pageData{Title: "Console off", Message: c.offWhy})
		return
	}
	if err := validQuery(r); err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, err.Error())
		return
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "this form was not sent from the console's own pages")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if r.Method == http.MethodPost && !c.formRead(w, r) {
		return
	}
	switch r.URL.Path {
	case consolePath + "signin":
		c.signIn(w, r)
		return
	case consolePath + "signout":
		c.signOut(w, r)
		return
	}
	op, err := c.session(r)
	if err != nil && !signInError(err) {
		c.sessionUnchecked(w, r, err)
		return
	}
	if err != nil {
		c.toSignIn(w, r, err)
		return
	}
	if r.Method == http.MethodPost && !c.sessions.validCSRF(op, r.PostFormValue("csrf")) {
		c.fail(w, r, op, http.StatusForbidden, "the form's CSRF token is missing or wrong: reload the page and try again")
		return
	}
	mux := c.routes(op)
	mux.ServeHTTP(w, r)
}

// maxFormBytes bounds a console form's body.
const maxFormBytes = 64 << 10

// formRead parses a POST's form, or answers why it cannot: 413 over
// maxFormBytes, 400 for a body that is not a form's encoding. Read later,
// such a body was an empty form: a 403 for its missing CSRF token, or a
// failed sign-in.
func (c *Console) formRead(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		c.fail(w, r, nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is larger than %d bytes", tooBig.Limit))
	default:
		c.fail(w, r, nil, http.StatusBadRequest, "the form's body is not URL-encoded form data: send it from the console's pages")
	}
	return false
}

// routes maps the console's paths for one signed-in operator.
func (c *Console) routes(op *session) *http.ServeMux {
	mux := http.NewServeMux()
	on := func(pattern string, f func(http.ResponseWriter, *http.Request, *session)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { f(w, r, op) })
	}
	on("GET /console/{$}", c.overview)
	on("GET /console/dead-letters", c.deadLetterList)
	on("GET /console/dead-letters/{id}", c.deadLetterDetail)
	on("POST /console/dead-letters/{id}/requeue", c.deadLetterRequeue)
	on("POST /console/dead-letters/requeue", c.deadLetterRequeueMatching)
	on("GET /console/orders", c.orderSearch)
	on("GET /console/orders/{orderNo}", c.orderDetail)
	on("GET /console/outbox", c.outboxList)
	on("GET /console/outbox/{id}", c.outboxDetail)
	on("POST /console/outbox/{id}/requeue", c.outboxRequeue)
	on("GET /console/refunds", c.refundList)
	on("GET /console/refunds/{paymentId}", c.refundDetail)
	on("POST /console/refunds/{paymentId}/refunded", c.refundMark)
	on("GET /console/fulfilment", c.flagList)
	on("GET /console/runs", c.runList)
	if c.cfg.Tasks != nil {
		on("GET /console/tasks", c.taskList)
		on("GET /console/tasks/{bizUuid}", c.taskDetail)
		on("POST /console/tasks/{bizUuid}/requeue", c.taskRequeue)
		on("POST /console/tasks/{bizUuid}/cancel", c.taskCancel)
	}
	on("/console/", func(w http.ResponseWriter, r *http.Request, op *session) {
		if allow := allowedMethods(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			c.fail(w, r, op, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s: use %s (an action is a button on its page)",
				r.Method, r.URL.Path, allow))
			return
		}
		c.fail(w, r, op, http.StatusNotFound, fmt.Sprintf("no console page at %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// sameOrigin refuses a POST whose Origin (or, without one, Referer) names
// another host: SameSite=Strict keeps the session cookie off such
// requests already, this also covers the sign-in form.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true // non-browser clients send neither
	}
	u, err := url.Parse(src)
	return err == nil && u.Host == r.Host
}

// pageData is what every page template gets besides its own data.
type pageData struct {
	Title    string
	Operator string
	CSRF     string
	Message  string // the error or notice of the page
	Nav      string // the section the page belongs to
	Tasks    bool   // the delayed-task pages exist
	// Sourced says the page reads the order database of ?source=: it
	// offers the choice of Sources (order.sources; none without it).
	Sourced bool
	Sources []string
	Source  string     // the request's ?source=, "" for mysql.dsn's database
	Path    string     // the page's path, where the choice of source goes
	Keep    url.Values // the page's filters, kept when the source changes
	Data    any
}

// render executes page with data into w with the status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, op *session, d pageData) {
	if _, ok := c.pages[page]; !ok {
		panic("console: no template " + page)
	}
	if op != nil {
		d.Operator, d.CSRF = op.name, c.sessions.csrf(op)
	}
	d.Tasks = c.cfg.Tasks != nil
	d.Source, d.Path = requestSource(r), r.URL.EscapedPath()
	if _, err := c.viewsOf(r); err != nil {
		d.Source = "" // links carrying a source that is none would all answer 400
	}
	if d.Sourced {
		d.Sources, d.Keep = c.sources, r.URL.Query()
		d.Keep.Del("source")
		d.Keep.Del("after") // a page of another database's list
	}
	t, err := c.pageFor(page, d.Source)
	var b bytes.Buffer
	if err == nil {
		err = t.ExecuteTemplate(&b, "layout", d)
	}
	if err != nil {
		c.log.ErrorContext(r.Context(), "console template", "page", page, "err", err)
		http.Error(w, "internal error; see the executor log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page with status and msg.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, op *session, status int, msg string) {
	c.render(w, r, status, "error", op, pageData{Title: http.StatusText(status), Message: msg})
}

// failErr renders the page for a domain error: 400 naming the field of bad
// input, 404 for what does not exist, 409 for a state that refuses the
// action, 500 (logged) otherwise.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, op *session, err error) {
	var inv *oplist.InvalidInputError
	var dinv *delay.InvalidError
	switch {
	case errors.As(err, &inv):
		c.fail(w, r, op, http.StatusBadRequest, fmt.Sprintf("%s: %s", inv.Field, inv.Msg))
	case errors.As(err, &dinv):
		c.fail(w, r, op, http.StatusBadRequest, fmt.Sprintf("%s: %s", dinv.Field, dinv.Msg))
	case isNotFound(err):
		c.fail(w, r, op, http.StatusNotFound, err.Error())
	case errors.Is(err, deadletters.ErrResolved), errors.Is(err, delay.ErrConflict),
		errors.Is(err, outbox.ErrNotParked), errors.Is(err, refunds.ErrDone):
		c.fail(w, r, op, http.StatusConflict, err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
	default:
		c.log.ErrorContext(r.Context(), "console", "method", r.Method, "path", r.URL.Path, "err", err)
		c.fail(w, r, op, http.StatusInternalServerError, "internal error; see the executor log")
	}
}

// isNotFound reports whether err says that what was asked for does not
// exist.
func isNotFound(err error) bool {
	return errors.Is(err, deadletters.ErrNotFound) || errors.Is(err, orders.ErrOrderNotFound) || errors.Is(err, delay.ErrNotFound) ||
		errors.Is(err, outbox.ErrNotFound) || errors.Is(err, refunds.ErrNotFound)
}

// failLookup renders the page for an error of looking up what (e.g.
// "order O-1"): a plain 404 page saying there is no such thing, without
// the error chain, or failErr's page for any other error.
func (c *Console) failLookup(w http.ResponseWriter, r *http.Request, op *session, err error, what string) {
	if isNotFound(err) {
		c.render(w, r, http.StatusNotFound, "error", op, pageData{Title: "No " + what})
		return
	}
	c.failErr(w, r, op, err)
}

// static serves the embedded style sheet.
func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, consolePath)
	b, err := fs.ReadFile(consoleFiles, "console/"+name)
	if err != nil || r.Method != http.MethodGet || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(name, ".css") {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	_, _ = w.Write(b)
}

// audit logs an operator's action: who, what, on what, with what result.
func (c *Console) audit(r *http.Request, op *session, action, target string, err error, attrs ...any) {
	attrs = append([]any{"operator", op.name, "action", action, "target", target}, attrs...)
	if err != nil {
		c.log.WarnContext(r.Context(), "console action refused or failed", append(attrs, "err", err.Error())...)
		return
	}
	c.log.InfoContext(r.Context(), "console action", attrs...)
}
